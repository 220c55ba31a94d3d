# A flapping accessory: 100 plug cycles in 10 s of an accessory whose entry launches a unit. Starts and stops
# coalesce (a start and a stop that meet before the start was sent cancel out) and the accessory's starts are held
# while it flaps: a handful of jobs, and at the end the unit of the connection that stayed, and only it, runs.

use_test_service
install_test_files launch
systemctl reload accmond.service

start=$(cursor)
began=$(date +%s%N)
for cycle in $(seq 0 99); do
  # One cycle every 100 ms: plugged, then unplugged half-way (the last one stays plugged).
  until [ "$(date +%s%N)" -ge $((began + cycle * 100000000)) ]; do sleep 0.005; done
  last=$(plug usb 16c0 0483 STORM-1 "Storm")
  [ "$cycle" = 99 ] && break
  until [ "$(date +%s%N)" -ge $((began + cycle * 100000000 + 50000000)) ]; do sleep 0.005; done
  accmon simulate disconnect "$last"
done
took=$((($(date +%s%N) - began) / 1000000))
final=accmon-storm@$last.service
info "100 plug cycles in $took ms; the last connection, $last, stays"
check "the storm took at most 11 s" test "$took" -le 11000
check "once the storm is over, the last connection's unit runs: $final (within the flap hold, at most 8 s)" \
  wait_for 20 is_active "$final"
sleep 1
expect "... and it is the only accmon-storm instance that runs" \
  "$(systemctl list-units --no-legend --plain --state=active,activating 'accmon-storm@*' | awk '{print $1}' | tr '\n' ' ')" \
  "$final "
starts=$(journal_after "$start" -u accmond -o cat | grep -c '^start job sent: accmon-storm@')
stops=$(journal_after "$start" -u accmond -o cat | grep -c '^stop job sent: accmon-storm@')
started=$(journal_after "$start" -o cat _PID=1 | grep -cE '^Started accmon-storm@[0-9]+\.service')
info "accmond sent $starts starts and $stops stops; systemd started $started instances"
check "a handful of jobs for 200 plug events: at most 8 starts" test "$starts" -le 8
check "... and at most 8 stops" test "$stops" -le 8
expect "... systemd started exactly the units accmond asked for" "$started" "$starts"
accmon simulate disconnect "$last"
check "the last unplug stops $final" wait_for 10 bash -c "[ \"\$(systemctl is-active $final)\" != active ]"
