# Type=notify: systemd reports accmond.service active only once accmond sent READY=1, and shows its STATUS= line.

use_shipped_service() { systemctl is-active -q accmond.service || accmon list >/dev/null; }
use_shipped_service
status_text=$(prop accmond.service StatusText)
check "StatusText= is accmond's STATUS= line ('$status_text')" grep -qE '^Serving [0-9]+ clients?; [0-9]+ accessor' <<<"$status_text"
# The line changes as clients come and go (the 'accmon list' above may still be leaving): compare systemctl's view
# with StatusText= read just before it, a few times, rather than with the value read above.
status_shows_it() {
    local current
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        current=$(prop accmond.service StatusText)
        systemctl status --no-pager accmond.service | grep -qF "Status: \"$current\"" && return 0
        sleep 0.2
    done
    return 1
}
check "systemctl status accmond shows it" status_shows_it

# Hold the main process before it becomes accmond: systemd has started it, but only accmond's READY=1 may make the
# unit active. The shell execs accmond, so the main PID (NotifyAccess=main) stays the same.
hold=$scratch/hold
touch "$hold"
systemctl stop accmond.service 2>/dev/null  # (it warns that accmond.socket can start it again)
printf '[Service]\nExecStart=\nExecStart=/bin/sh -c '"'"'while [ -e %s ]; do sleep 0.05; done; exec %s'"'"'\n' \
  "$hold" "$(shipped_exec_start)" | dropin accmond.service 20-hold
systemctl start --no-block accmond.service
held() { [ "$(prop accmond.service ActiveState)" = activating ] && [ "$(main_pid)" != 0 ]; }
if wait_for 10 held; then
  held_pid=$(main_pid)
  samples=0
  for _ in $(seq 20); do held && samples=$((samples + 1)); sleep 0.05; done
  expect "while its main process runs but has not sent READY=1, accmond.service stays 'activating' (20 samples over 1 s)" \
    "$samples" 20
  rm -f "$hold"
  if wait_for 10 is_active accmond.service; then
    pass "... and becomes active once accmond sent READY=1"
    expect "... with the same main process, now accmond (the shell exec'd it)" \
      "$(main_pid) $(cat "/proc/$(main_pid)/comm")" "$held_pid accmond"
    # The journal's monotonic time is the one systemd's timestamps use.
    listening=$(journalctl -u accmond -o export -q _PID="$held_pid" MESSAGE_ID=fde6b016229a48e0801432d9f53682a1 |
      sed -n 's/^__MONOTONIC_TIMESTAMP=//p' | tail -1)
    active=$(prop accmond.service ActiveEnterTimestampMonotonic)
    main_start=$(prop accmond.service ExecMainStartTimestampMonotonic)
    check "systemd: started the main process, then accmond listened, then the unit became active (µs: ${main_start:-?} < ${listening:-?} <= ${active:-?})" \
      test -n "$listening" -a "${main_start:-0}" -lt "${listening:-0}" -a "${listening:-0}" -le "${active:-0}"
  else
    fail "... and becomes active once accmond sent READY=1: still $(prop accmond.service ActiveState) after 10 s"
  fi
else
  fail "while its main process has not sent READY=1, accmond.service stays 'activating': $(prop accmond.service ActiveState)"
fi
rm -f "$hold"
remove_dropin accmond.service 20-hold
systemctl restart accmond.service
