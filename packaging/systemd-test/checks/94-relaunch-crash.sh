# An app that crashes at start is not relaunched in a loop: after its first relaunch it waits 2 s, then 4 s..., and
# at most 3 relaunches a minute; each wait is logged.

use_test_service
ensure_user accmon-app accmon
install_test_files relaunch
systemctl reload accmond.service
uid=$(id -u accmon-app)
crash=accmon-crashapp@$uid.service

# The app registers its unit, then goes away; its unit only crashes from now on.
# (setpriv execs accmon: $! is the watch, which the SIGKILL below must reach.)
setpriv --reuid=accmon-app --regid=accmon-app --init-groups --reset-env -- \
  accmon watch --json --restore-id crash-test --relaunch accmon-crashapp@.service >"$scratch/crash.out" 2>&1 &
watch=$!
check "the app registers accmon-crashapp@.service with its restore id" \
  wait_for 10 grep -qs '"type":"session"' "$scratch/crash.out"
stop_background "$watch" KILL
check "... and goes away: its session is kept" \
  wait_for 5 bash -c "accmon status --json | grep -q '\"sessionID\":\"restore:crash-test\"'"

start=$(cursor)
began=$(date +%s)
for n in $(seq 1 16); do  # an event every 0.75 s for 12 s
  plug serial 0403 6001 "CRASH-$n" "Crash $n" >/dev/null
  sleep 0.75
done
sleep 1
# systemd reports a start of /bin/false as "Started" or "Failed to start", as the exit races the exec: count the
# attempts ("Starting") and the exits.
started=$(journal_after "$start" -o cat _PID=1 | grep -cE "^Starting $crash")
crashed=$(journal_after "$start" -o cat _PID=1 | grep -cE "^$crash: Main process exited, code=exited, status=1/FAILURE")
info "in $(($(date +%s) - began)) s: systemd started $crash $started times, $crashed exited with status 1"
expect "16 events in 12 s relaunched the crashing app 3 times (backoff 2 s then 4 s; 3 a minute)" "$started" 3
expect "... each of which crashed" "$crashed" 3
check "accmond logged the backoff (journal)" \
  journal_has "$start" "^relaunch rate-limited: the backoff since its last relaunch has not passed" -u accmond -o cat \
  RESTORE_ID=crash-test
check "... and the cap per minute" \
  journal_has "$start" "^relaunch rate-limited: it was relaunched 3 times in the last minute" -u accmond -o cat \
  RESTORE_ID=crash-test
