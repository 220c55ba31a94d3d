# Launch on connect: an entry with "launch" makes accmond (as its user accmond, through the system bus and the
# package's polkit rule) start the template's instance for each connection it admits, and stop it when the
# connection ends; a kept unit outlives its connection without piling up instances; after a restart accmond still
# stops the units it started before.

use_test_service
install_test_files launch
systemctl reload accmond.service

# plug_launch PRODUCT SERIAL: a simulated accessory of vendor 16c0 (the launch test entries); prints its connection.
plug_launch() { plug usb 16c0 "$1" "$2" "Launch $2"; }
unit_of() { printf 'accmon-%s@%s.service' "$1" "$2"; }
is_inactive() { [ "$(systemctl is-active "$1")" != active ] && [ "$(systemctl is-active "$1")" != activating ]; }

start=$(cursor)
c=$(plug_launch 05dc LT-1)
unit=$(unit_of launchtest "$c")
check "an accessory the entry 'launch-test' admits (connection $c) starts $unit" wait_for 10 is_active "$unit"
check "... which learns its accessory with accmon list --json --connection $c (as a dynamic user in group accmon)" \
  wait_for 5 grep -qs "\"connectionID\":$c,.*\"serialNumber\":\"LT-1\"" "$scratch/launch-$c.json"
check "... accmond logged the job it sent and its result (journal)" \
  journal_has "$start" "^start job done: $unit" -u accmond -o cat
expect "... accmond's journal entries name the unit (LAUNCH_UNIT)" \
  "$(journal_after "$start" -u accmond -o json MESSAGE_ID=e1929a28fb984ba7b8364f8cff8414ed | grep -c "\"LAUNCH_UNIT\":\"$unit\"")" 2
expect "... asked for by accmond running as its user accmond, not root: the package's polkit rule allowed it" \
  "$(stat -c %U "/proc/$(main_pid)")" accmond
accmon simulate disconnect "$c"
check "its unplug stops $unit" wait_for 10 is_inactive "$unit"

# A kept unit: started once per accessory; a new connection of the same accessory starts nothing while it runs.
k1=$(plug_launch 27dd KEEP-1)
kept1=$(unit_of launchkept "$k1")
check "a kept entry's accessory (connection $k1) starts $kept1" wait_for 10 is_active "$kept1"
accmon simulate disconnect "$k1"
sleep 1
check "... which keeps running after the unplug ('keep': true)" is_active "$kept1"
start=$(cursor)
k2=$(plug_launch 27dd KEEP-1)
check "the same accessory again (connection $k2): accmond finds $kept1 still active and starts nothing" \
  journal_has "$start" "^$kept1 is still active: kept for this connection" -u accmond -o cat
check "... so $(unit_of launchkept "$k2") never ran" is_inactive "$(unit_of launchkept "$k2")"
expect "... one instance of the kept template runs" \
  "$(systemctl list-units --no-legend --state=active 'accmon-launchkept@*' | wc -l)" 1
accmon simulate disconnect "$k2"
systemctl stop "$kept1"
k3=$(plug_launch 27dd KEEP-1)
check "once $kept1 has stopped, the accessory's next connection ($k3) starts its own instance" \
  wait_for 15 is_active "$(unit_of launchkept "$k3")"
accmon simulate disconnect "$k3"
systemctl stop "$(unit_of launchkept "$k3")"

# Across a restart: the new accmond knows the unit the old one started, and stops it when its accessory goes
# (simulated accessories, like plugged ones, outlive the restart: they are in the state file).
d=$(plug_launch 05dc LT-2)
check "before a restart: $(unit_of launchtest "$d") runs for connection $d" wait_for 10 is_active "$(unit_of launchtest "$d")"
check "... and the state file keeps it" wait_for 5 grep -qs "\"slot\":\"$(unit_of launchtest "$d")\"" "$state_file"
systemctl restart accmond.service
wait_for 10 is_active accmond.service
sleep 1
check "after systemctl restart accmond, the unit still runs (connection $d outlived the restart)" \
  is_active "$(unit_of launchtest "$d")"
accmon simulate disconnect "$d" >/dev/null
check "... and the new accmond stops it when connection $d ends" \
  wait_for 15 is_inactive "$(unit_of launchtest "$d")"

# A unit that fails to start: logged with systemd's reason, retried after 1, 2 and 4 s, then given up.
start=$(cursor)
f=$(plug_launch 05df BROKEN-1)
broken=$(unit_of launchbroken "$f")
check "a unit that fails to start ($broken) is logged with systemd's reason: the job result, Result, ExecMainStatus" \
  journal_has "$start" "^start $broken failed: start job failed; the unit is failed, Result=exit-code, ExecMainStatus=203; retrying in 1000 ms" -u accmond -o cat
check "... retried after 1, 2 and 4 s, then given up (journal)" \
  wait_for 15 journal_matches "$start" "^start $broken failed: .*; giving up" -u accmond -o cat
sleep 1
expect "... so systemd tried it 4 times" "$(journal_after "$start" -o cat _PID=1 | grep -c "^Starting $broken")" 4
accmon simulate disconnect "$f"
