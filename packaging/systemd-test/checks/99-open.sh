# Accessory.Open as shipped, with polkit and logind (docs/DBUS.md, "Opening an accessory"): a user in front of the
# seat (a PAM session on seat0, made here through pam_systemd) opens a node of root:dialout 0660 without being in
# dialout, through accmond (its user accmond, no capability) and the socket-activated accmon-nodes, which opens it and
# whose descriptor accmond passes on; polkit decides (org.accmon.Accmon1.open-accessory: allow_active yes). A user of
# no session is refused by polkit. pkaction and pkcheck show the shipped actions. With the helper stopped, Open fails
# saying so and holds nothing. A claim made with release-when-inactive ends when its holder's session is locked
# (LockedHint).
#
# The device is made as 98-claims.sh makes its own (mknod, the udev record 70-accmon.rules leads to, udevd's event on
# the udev netlink group), with /dev/zero's device number and its own port.

node=/dev/bus/usb/003/010
devpath=/devices/pci0000:00/0000:00:14.0/usb3/3-10
serial=OPEN99
record=/run/udev/data/c1:5
shared=$scratch/open

if [ -f /etc/systemd/system/accmond.service.d/50-systemd-test.conf ]; then
  remove_dropin accmond.service 50-systemd-test # accmond as shipped
fi
install_test_files open
if [ ! -e /run/udev/control ]; then
  mkdir -p /run/udev && python3 -c \
    'import socket; socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET).bind("/run/udev/control")' &&
    chmod 0600 /run/udev/control
fi
check "systemctl restart accmond.service (as shipped, plus the manifest drop-in 99-open-test.json)" \
  systemctl restart accmond.service
expect "accmond runs the shipped command line (--dbus)" \
  "$(tr '\0' ' ' <"/proc/$(main_pid)/cmdline" | sed 's/ $//')" "$(shipped_exec_start)"

# --- polkit's actions, as shipped ---------------------------------------------------------------------------------
actions=$(pkaction --action-id org.accmon.Accmon1.open-accessory --verbose 2>&1)
check "pkaction shows org.accmon.Accmon1.open-accessory: implicit active yes" grep -q 'implicit active: *yes' <<<"$actions"
away_defaults() {
  grep -q 'implicit any: *auth_admin_keep' <<<"$actions" && grep -q 'implicit inactive: *auth_admin_keep' <<<"$actions"
}
check "... implicit any and inactive auth_admin_keep" away_defaults
check "... owned by the user accmond (who may then check other subjects)" grep -q 'org.freedesktop.policykit.owner.*unix-user:accmond' <<<"$actions"
check "pkaction shows org.accmon.Accmon1.manage (auth_admin_keep even in front)" bash -c \
  "pkaction --action-id org.accmon.Accmon1.manage --verbose | grep -q 'implicit active: *auth_admin_keep'"

# --- the device: root:dialout 0660 --------------------------------------------------------------------------------
mkdir -p "$(dirname "$node")" && rm -f "$node" && mknod "$node" c 1 5 && chown root:dialout "$node" && chmod 0660 "$node"
mkdir -p /run/udev/data "$shared" && chmod 1777 "$shared" && rm -f "$shared"/*
printf 'I:%s\nE:ACCMON_REMOVABLE=removable\nE:ACCMON_KIND=usb\nG:accmon\nQ:accmon\nV:1\n' \
  "$(awk '{ printf "%d", $1 * 1000000 }' /proc/uptime)" >"$record"
/testdata/harness/files/send-uevent add "$devpath" usb 9901 DEVNAME="$node" DEVTYPE=usb_device DRIVER=usb \
  PRODUCT=1209/c1a2/100 TYPE=0/0/0 BUSNUM=003 DEVNUM=010 MAJOR=189 MINOR=265 USEC_INITIALIZED=4242424 \
  ID_BUS=usb ID_VENDOR=accmon ID_VENDOR_ENC=accmon ID_VENDOR_ID=1209 ID_MODEL=Bench_Meter 'ID_MODEL_ENC=Bench\x20Meter' \
  ID_MODEL_ID=c1a2 ID_REVISION=0100 ID_SERIAL=accmon_Bench_Meter_$serial ID_SERIAL_SHORT=$serial \
  ID_USB_INTERFACES=:ff0000: ID_PATH=pci-0000:00:14.0-usb-0:10 ID_PATH_TAG=pci-0000_00_14_0-usb-0_10 \
  ACCMON_REMOVABLE=removable ACCMON_KIND=usb TAGS=:accmon: CURRENT_TAGS=:accmon:
connection() { accmon list --json | python3 -c 'import json, sys
print(next((a["connectionID"] for a in json.load(sys.stdin)["accessories"] if a.get("serialNumber") == sys.argv[1]), ""))' "$serial"; }
wait_for 10 test -n "$(connection)"
id=$(connection)
check "accmond announces the device: connection $id, node $node root:dialout 0660" test -n "$id"

# --- a user in front of the seat, not in dialout ------------------------------------------------------------------
# A user who logs in: a shell and a home (ensure_user's have neither).
getent passwd accmon-seated >/dev/null || useradd --create-home --shell /bin/sh --groups accmon accmon-seated
ensure_user accmon-away accmon
refute "accmon-seated is not in dialout" bash -c "id -nG accmon-seated | grep -qw dialout"
output=$(as_user accmon-seated sh -c "exec 3<>$node && echo opened" 2>&1)
check "... so it cannot open the node itself: '$output'" grep -q 'Permission denied' <<<"$output"
# seated SCRIPT: SCRIPT as accmon-seated in a PAM session on seat0 (runuser -l: pam_systemd registers it with logind,
# which makes it the seat's active session: the container's seat0 has no VTs to switch).
seated() { XDG_SEAT=seat0 XDG_SESSION_TYPE=tty XDG_SESSION_CLASS=user runuser -l accmon-seated -c "$1"; }
session_info=$(seated 'loginctl show-session "$XDG_SESSION_ID" -p Seat -p Active -p Remote -p Class' 2>&1)
expect "runuser -l makes a local session of accmon-seated on seat0, active" \
  "$(sort <<<"$session_info" | tr '\n' ' ' | sed 's/ $//')" "Active=yes Class=user Remote=no Seat=seat0"
check "pkcheck: polkit allows org.accmon.Accmon1.open-accessory to a process of that session" \
  seated 'pkcheck --action-id org.accmon.Accmon1.open-accessory --process $$'
start=$(cursor)
output=$(seated "accmon open --connection $id -- sh -c 'head -c 8 <&3 | od -An -tx1; echo \"fd \$ACCMON_OPEN_FD\"'" 2>&1)
expect "accmon open as accmon-seated: the command reads the node through descriptor 3 (/dev/zero's zeros)" \
  "$(tr -s ' \n' ' ' <<<"$output" | sed 's/^ //; s/ $//')" "00 00 00 00 00 00 00 00 fd 3"
check "... accmon-nodes opened it (journal: open)" journal_has "$start" "open: $node: read and write" -u accmon-nodes
check "... for the claim of accmon-seated (journal, claim granted)" journal_has "$start" 'claim granted.*accmon-seated' -u accmond
restored_node() { [ "$(stat -c '%U:%G %a' "$node")" = "root:dialout 660" ]; }
check "... and the node is as before once the command ended (root:dialout 660)" wait_for 5 restored_node

# --- twenty more: the helper keeps no descriptor of them --------------------------------------------------------
helper_fds() { ls "/proc/$(systemctl show -P MainPID accmon-nodes.service)/fd" | wc -l; }
accmond_fds() { ls "/proc/$(main_pid)/fd" | wc -l; }
before="$(helper_fds) $(accmond_fds)"
for _ in $(seq 20); do seated "accmon open --connection $id -- true" >/dev/null 2>&1 || break; done
check "... twenty more accmon open runs" seated "accmon open --connection $id -- true"
descriptors_as_before() { [ "$(helper_fds) $(accmond_fds)" = "$before" ]; }
wait_for 5 descriptors_as_before
expect "... leave accmon-nodes and accmond with the descriptors they had (helper, accmond)" \
  "$(helper_fds) $(accmond_fds)" "$before"

# --- the helper down: refused saying so, nothing held -------------------------------------------------------------
systemctl stop accmon-nodes.socket accmon-nodes.service
output=$(seated "accmon open --connection $id -- true" 2>&1)
status=$?
expect "with accmon-nodes stopped, accmon open fails (exit 1)" "$status" 1
check "... saying the helper is unreachable: '$(grep 'accmon: open' <<<"$output" | head -1)'" \
  grep -q 'accmon-nodes' <<<"$output"
check "... and no claim is left" bash -c "accmon claims --json | python3 -c 'import json, sys; sys.exit(len(json.load(sys.stdin)[\"claims\"]))'"
systemctl start accmon-nodes.socket

# --- a user of no session: polkit refuses -------------------------------------------------------------------------
output=$(as_user accmon-away accmon open --no-ask --connection "$id" -- true 2>&1)
status=$?
expect "accmon open as accmon-away (no login session) exits 77" "$status" 77
check "... polkit said no: '$(head -1 <<<"$output")'" grep -q 'polkit' <<<"$output"

# --- release-when-inactive: the holder's session locked ------------------------------------------------------------
seated "accmon open --release-when-inactive --connection $id -- sh -c 'echo running >$shared/running; exec sleep 60' \
  >$shared/open.out 2>$shared/open.err; echo \$? >$shared/status" &
wait_for 15 test -e "$shared/running"
check "accmon open --release-when-inactive runs its command" test -e "$shared/running"
# The session's LockedHint, as a screen locker sets it (root may too).
session=$(loginctl list-sessions --no-legend | awk '$3 == "accmon-seated" { print $1; exit }')
session_path=$(busctl call org.freedesktop.login1 /org/freedesktop/login1 org.freedesktop.login1.Manager GetSession s \
  "$session" | awk '{ gsub(/"/, "", $2); print $2 }')
check "locking accmon-seated's session $session (SetLockedHint true)" \
  busctl call org.freedesktop.login1 "$session_path" org.freedesktop.login1.Session SetLockedHint b true
wait_for 15 test -s "$shared/status"
expect "... ends the claim made with release-when-inactive: accmon open exits 75" "$(cat "$shared/status" 2>/dev/null)" 75
check "... saying why: '$(cat "$shared/open.err" 2>/dev/null | head -1)'" grep -q 'login session' "$shared/open.err"
wait
