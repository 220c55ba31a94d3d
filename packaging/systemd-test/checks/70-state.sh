# StateDirectory=: accmond's state lives in /var/lib/accmon, its user's, survives a restart, and connection ids and
# sequence numbers keep increasing across it.

use_test_service
uid=$(prop accmond.service UID)
expect "accmond runs as the system user accmond (uid $uid) in the group accmon" \
  "$(id -un "$uid") $(getent group "$(prop accmond.service GID)" | cut -d: -f1)" "accmond accmon"
expect "/var/lib/accmon and state.json belong to accmond, modes 0700 and 0600 (StateDirectory=)" \
  "$(stat -c '%U %a' /var/lib/accmon "$state_file" | tr '\n' ' ')" "accmond 700 accmond 600 "
migration_logged() { journalctl -b --no-pager -q -u accmond.service | grep -E 'DynamicUser=|Found pre-existing'; }
refute "systemd migrated no directory of accmond (journal)" migration_logged

id=state-test
e=$(plug serial 0403 6010 ST-E "Adapter E")
e_seq=$(sequence)
accmon watch --json --restore-id "$id" >"$scratch/state-watch1.out" 2>&1 &
watch=$!
check "a client with restore id '$id' has its session" wait_for 10 grep -qs '"type":"session"' "$scratch/state-watch1.out"
stop_background "$watch" KILL
kept() { accmon status --json | grep -q "\"sessionID\":\"restore:$id\""; }
check "a client with restore id '$id' went away: its session is kept" wait_for 5 kept

pid=$(main_pid)
check "systemctl restart accmond" systemctl restart accmond.service
check "... a new accmond runs" test "$(main_pid)" != "$pid" -a "$(main_pid)" != 0
check "... and it still keeps the session of restore id '$id' (read back from the state directory)" kept
f=$(plug serial 0403 6010 ST-F "Adapter F")
f_seq=$(sequence)
check "connection ids keep increasing across the restart ($e -> $f)" test "$f" -gt "$e"
check "sequence numbers keep increasing across the restart ($e_seq -> $f_seq)" test "$f_seq" -gt "$e_seq"
accmon watch --json --restore-id "$id" >"$scratch/state-watch2.out" 2>&1 &
watch=$!
restored_with_e_then_f() {
  grep -q "\"connectionID\":$e,.*\"restored\":true" "$scratch/state-watch2.out" &&
    grep -q "\"connectionID\":$f,.*\"type\":\"connect\"" "$scratch/state-watch2.out"
}
check "the client with restore id '$id' gets its session back: restored, knowing Adapter E, then Adapter F's connect" \
  wait_for 10 restored_with_e_then_f
stop_background "$watch"
