# After a daemon restart, an event recorded for every preserved session does not start every registered app at once: at
# most 4 relaunched apps that have not said hello yet; the others wait (logged).

use_test_service
ensure_user accmon-app accmon
uid=$(id -u accmon-app)
# A fresh state: only this check's sessions are kept (the earlier checks' registrations would compete for the 4).
systemctl stop accmond.service
rm -f "$state_file"
systemctl start accmond.service
# Six apps, each with its own template, that never say hello once relaunched (they stay awaited).
dropin_manifest=/etc/accmon/manifest.d/95-slow-apps.json
units=()
for n in 1 2 3 4 5 6; do
  printf '[Unit]\nDescription=accmon slow test app %s of uid %%i\nStartLimitIntervalSec=0\n\n[Service]\nType=exec\nUser=%%i\nExecStart=/bin/sleep infinity\n' \
    "$n" >"/etc/systemd/system/accmon-slow$n@.service"
  units+=("{\"unit\": \"accmon-slow$n@.service\", \"access\": {\"users\": [\"accmon-app\"]}}")
done
printf '{"version": 1, "relaunch": [%s]}\n' "$(IFS=,; echo "${units[*]}")" >"$dropin_manifest"
systemctl daemon-reload
systemctl reload accmond.service
x=$(plug serial 0403 6001 SLOW-X "Slow X")
for n in 1 2 3 4 5 6; do
  # (setpriv execs accmon: $! is the watch, which the SIGKILL must reach.)
  setpriv --reuid=accmon-app --regid=accmon-app --init-groups --reset-env -- \
    accmon watch --json --restore-id "slow$n" --relaunch "accmon-slow$n@.service" >"$scratch/slow$n.out" 2>&1 &
  watch=$!
  wait_for 10 grep -qs '"type":"session"' "$scratch/slow$n.out"
  stop_background "$watch" KILL
done
kept_six() { [ "$(accmon status --json | grep -o '"sessionID":"restore:slow[0-9]"' | wc -l)" = 6 ]; }
check "six apps registered their units and went away: six sessions kept (each knew Slow X, connection $x)" \
  wait_for 10 kept_six

start=$(cursor)
systemctl restart accmond.service
wait_for 10 is_active accmond.service
# Slow X outlived the restart (simulated accessories are in the state file); its disconnect now is an event for
# every kept session at once.
accmon simulate disconnect "$x" >/dev/null
running() { systemctl list-units --no-legend --plain --state=active,activating "accmon-slow*@$uid.service" | wc -l; }
wait_for 10 bash -c "[ \"\$(systemctl list-units --no-legend --plain --state=active 'accmon-slow*@$uid.service' | wc -l)\" -ge 4 ]"
sleep 3
expect "after the restart, Slow X's disconnect is recorded for all six; 4 apps were relaunched, not 6" "$(running)" 4
check "... the others wait, logged: 4 relaunched apps have not said hello yet" \
  journal_has "$start" '^relaunch rate-limited: 4 relaunched apps have not said hello yet; it waits' -u accmond -o cat
systemctl stop "accmon-slow*@$uid.service"
rm -f "$dropin_manifest" /etc/systemd/system/accmon-slow?@.service
systemctl daemon-reload
