# The watchdog: systemd kills a frozen accmond (SIGSTOP: it stops sending WATCHDOG=1) and starts it again, and a
# client with a restore id gets its session back from the new accmond, with the events it missed.

use_test_service   # --simulate, WatchdogSec=4s
id=watchdog-test
a=$(plug serial 0403 6001 WD-A "Adapter A")
accmon watch --json --restore-id "$id" >"$scratch/watch1.out" 2>"$scratch/watch1.err" &
watch=$!
if wait_for 10 grep -qs '"type":"session"' "$scratch/watch1.out"; then
  check "a client with restore id '$id' has Adapter A (connection $a)" grep -q "\"connectionID\":$a," "$scratch/watch1.out"
else
  fail "a client with restore id '$id': no session line within 10 s"
  indent <"$scratch/watch1.err"
fi
stop_background "$watch" KILL
# While the client is away: Stick B comes; the kept session records it (and the state file has it within 100 ms).
b=$(plug usb 0781 5583 WD-B "Stick B")
b_seq=$(sequence)
check "the kept session recorded Stick B's connect (seq $b_seq) in the state file" \
  wait_for 5 grep -qs "\"change\":\"connect\",\"seq\":$b_seq}" "$state_file"

frozen=$(main_pid)
restarts=$(prop accmond.service NRestarts)
start=$(cursor)
kill -STOP "$frozen"
restarted() { local pid; pid=$(main_pid); [ "$pid" != 0 ] && [ "$pid" != "$frozen" ] && is_active accmond.service; }
if wait_for 30 restarted; then
  pass "a SIGSTOPped accmond is replaced by a new one (pid $frozen -> $(main_pid))"
else
  fail "a SIGSTOPped accmond is replaced by a new one: still pid $(main_pid), $(systemctl is-active accmond.service) after 30 s"
fi
check "... because systemd's watchdog fired (journal: 'Watchdog timeout')" \
  journal_has "$start" 'accmond.service: Watchdog timeout' -u accmond.service
expect "... and systemd restarted the service (NRestarts)" "$(prop accmond.service NRestarts)" "$((restarts + 1))"
refute "... and the frozen process is gone" kill -0 "$frozen"

# A and B, simulated, outlived the restart with their connection ids (the state file keeps them, as udev would still
# show plugged ones). After the restart, still away: A and B go and Adapter C comes.
check "Adapter A and Stick B outlived the restart (connections $a and $b)" \
  bash -c "accmon list --json | grep -q '\"connectionID\":$a,' && accmon list --json | grep -q '\"connectionID\":$b,'"
accmon simulate disconnect "$a" >/dev/null
accmon simulate disconnect "$b" >/dev/null
c=$(plug serial 0403 6015 WD-C "Adapter C")
accmon watch --json --restore-id "$id" >"$scratch/watch2.out" 2>"$scratch/watch2.err" &
watch=$!
if wait_for 10 grep -qs "\"connectionID\":$c,.*\"type\":\"connect\"" "$scratch/watch2.out"; then
  session=$(head -1 "$scratch/watch2.out")
  check "the client, back with restore id '$id', gets its session: restored, knowing Adapter A" \
    grep -qE "\"connectionID\":$a,.*\"restored\":true,\"type\":\"session\"" <<<"$session"
  check "... then Adapter A's disconnect (after the restart)" \
    grep -qE "\"connectionID\":$a,.*\"type\":\"disconnect\"" "$scratch/watch2.out"
  check "... and Adapter C's connect (after the restart)" \
    grep -qE "\"connectionID\":$c,.*\"type\":\"connect\"" "$scratch/watch2.out"
  refute "... and nothing of Stick B, which came and went while the client was away (coalesced)" \
    grep "\"connectionID\":$b," "$scratch/watch2.out"
else
  fail "the client, back with restore id '$id', gets Adapter C's connect within 10 s"
  indent <"$scratch/watch2.out"
  indent <"$scratch/watch2.err"
fi
stop_background "$watch"
