# Relaunch for a restore id: an app registers its unit in its hello (accmon watch --restore-id ID --relaunch
# TEMPLATE); killed, it is started again by accmond when an event waits for its session, and gets its missed events
# once. A user the manifest does not list cannot register, and a unit that would not run as the user is not started.

use_test_service
ensure_user accmon-app accmon
ensure_user accmon-member accmon
install_test_files relaunch
systemctl reload accmond.service
uid=$(id -u accmon-app)
app=accmon-relaunchtest@$uid.service
out=$scratch/relaunch-$uid.out
rm -f "$out"
# runs N: the output of the app's Nth run (the lines after its Nth RUN line).
runs() { awk -v n="$1" '/^RUN$/ { run++; next } run == n' "$out"; }
is_inactive() { [ "$(systemctl is-active "$1")" != active ] && [ "$(systemctl is-active "$1")" != activating ]; }

check "the app's first run: systemctl start $app" systemctl start "$app"
check "... it says hello with its restore id and the template (a session line)" \
  wait_for 10 bash -c "grep -qs '\"type\":\"session\"' '$out'"
systemctl kill --signal=KILL "$app"
check "the app is killed (SIGKILL)" wait_for 10 is_inactive "$app"
kept() { accmon status --json | grep -q '"sessionID":"restore:relaunch-test"'; }
check "... its session is kept for its restore id" wait_for 5 kept

start=$(cursor)
a=$(plug serial 0403 6001 RL-A "Relaunch A")
b=$(plug serial 0403 6001 RL-B "Relaunch B")
check "an accessory connects while the app is gone: accmond starts $app" wait_for 10 is_active "$app"
check "... and logs why (journal)" journal_has "$start" "^relaunching $app: events wait for the preserved session" -u accmond -o cat
check "the relaunched app gets its session back: restored" \
  wait_for 10 bash -c "awk '/^RUN\$/ { run++; next } run == 2' '$out' | grep -q '\"restored\":true,\"type\":\"session\"'"
got_both() { runs 2 | grep -q "\"connectionID\":$b,.*\"type\":\"connect\""; }
check "... then the connects it missed" wait_for 10 got_both
expect "... each once (connection $a)" "$(runs 2 | grep -c "\"connectionID\":$a,.*\"type\":\"connect\"")" 1
expect "... each once (connection $b)" "$(runs 2 | grep -c "\"connectionID\":$b,.*\"type\":\"connect\"")" 1
expect "accmond started the app once" "$(journal_after "$start" -u accmond -o cat | grep -c "^relaunching $app")" 1

# Once more: what the app consumed is not handed to it again.
systemctl kill --signal=KILL "$app"
wait_for 10 is_inactive "$app"
wait_for 5 kept
c=$(plug serial 0403 6001 RL-C "Relaunch C")
check "killed again, the app is relaunched for the next event" wait_for 10 is_active "$app"
got_c() { runs 3 | grep -q "\"connectionID\":$c,.*\"type\":\"connect\""; }
check "... and gets that connect" wait_for 10 got_c
expect "... and not again the ones it had consumed before (connections $a and $b)" \
  "$(runs 3 | grep -cE "\"connectionID\":($a|$b),.*\"type\":\"connect\"")" 0
systemctl stop "$app"

# Who may register, and what accmond starts.
output=$(as_user accmon-member accmon watch --json --restore-id x --relaunch accmon-relaunchtest@.service 2>&1)
status=$?
check "a user the manifest's relaunch does not list cannot register the unit (exit $status)" test "$status" != 0
check "... the daemon says why: '$output'" grep -q "may not register 'accmon-relaunchtest@.service'" <<<"$output"
# (setpriv execs accmon: $! is the watch, which the SIGKILL below must reach.)
setpriv --reuid=accmon-app --regid=accmon-app --init-groups --reset-env -- \
  accmon watch --json --restore-id root-test --relaunch accmon-relaunchroot@.service >"$scratch/root-test.out" 2>&1 &
watch=$!
wait_for 10 grep -qs '"type":"session"' "$scratch/root-test.out"
stop_background "$watch" KILL
check "a session registering accmon-relaunchroot@.service (no User=) is kept for its restore id" \
  wait_for 5 bash -c "accmon status --json | grep -q '\"sessionID\":\"restore:root-test\"'"
start=$(cursor)
plug serial 0403 6001 RL-D "Relaunch D" >/dev/null
check "a registered unit that would run as root is not started: accmond refuses it (journal)" \
  journal_has "$start" "accmon-relaunchroot@$uid.service runs as root \(it has no User=\), not as uid $uid" -u accmond -o cat
expect "... and it stays inactive" "$(systemctl is-active "accmon-relaunchroot@$uid.service")" inactive
