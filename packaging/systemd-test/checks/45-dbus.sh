# accmond on the system bus as shipped (docs/DBUS.md): the package's policy, activation file and unit. A call to
# org.accmon.Accmon1 while accmond is stopped starts it (D-Bus activation through accmond.service); a member of the
# group accmon sees the accessories with busctl (sd-bus); a user outside it is refused by the bus's policy.

use_test_service
ensure_user accmon-bus-member accmon
ensure_user accmon-bus-outsider
serial=BUS45
id=$(plug serial 0403 6001 "$serial" "Bus cable")
check "a test accessory is plugged: connection $id" test -n "$id"
check "the package installed the bus policy, the activation file and the interfaces" test -f \
  /usr/share/dbus-1/system.d/org.accmon.Accmon1.conf -a -f /usr/share/dbus-1/system-services/org.accmon.Accmon1.service \
  -a -f /usr/share/dbus-1/interfaces/org.accmon.Accmon1.xml
systemctl stop accmond.service 2>/dev/null # (its socket may start it again: only the bus call does here)
expect "accmond.service is stopped" "$(systemctl is-active accmond.service)" inactive
start=$(cursor)
tree=$(as_user accmon-bus-member busctl --system tree org.accmon.Accmon1 2>&1)
check "busctl --system tree org.accmon.Accmon1 as a member of accmon is answered" \
  grep -q '/org/accmon/Accmon1/accessories' <<<"$tree"
expect "... and the call started accmond.service (D-Bus activation)" \
  "$(prop accmond.service ActiveState)/$(prop accmond.service SubState)" active/running
check "... which owns the name as its user accmond" \
  journal_has "$start" 'bus: serving org.accmon.Accmon1' -u accmond
owner_uid=$(busctl --system status org.accmon.Accmon1 2>/dev/null | sed -n 's/^UID=\([0-9]*\).*/\1/p')
expect "... (the name's owner runs as uid $(id -u accmond))" "$owner_uid" "$(id -u accmond)"
# The simulated accessory stays plugged in across the restart (as hardware would): it is on the bus.
tree=$(as_user accmon-bus-member busctl --system tree org.accmon.Accmon1 2>&1)
check "the member sees the accessory's object: /org/accmon/Accmon1/accessories/$id" \
  grep -q "/org/accmon/Accmon1/accessories/$id" <<<"$tree"
name=$(as_user accmon-bus-member busctl --system get-property org.accmon.Accmon1 \
  "/org/accmon/Accmon1/accessories/$id" org.accmon.Accmon1.Accessory SerialNumber 2>&1)
expect "... with its properties (SerialNumber)" "$name" "s \"$serial\""
refused=$(as_user accmon-bus-outsider busctl --system tree org.accmon.Accmon1 2>&1)
check "a user outside the group accmon is refused by the bus: '$(head -1 <<<"$refused")'" \
  grep -q 'Access denied' <<<"$refused"
check_exposure accmond.service
