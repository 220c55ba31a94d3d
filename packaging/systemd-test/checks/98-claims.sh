# A claim through the whole packaged path: `accmon claim` → accmond as shipped (its user accmond, PrivateDevices=yes,
# no capability) → accmon-nodes, started through its socket → the device node of a real udev accessory.
#
# udevd does not run in the container, so the check does what it would: it makes the node with mknod with the owner,
# group and mode udev's rules give (a USB device's usbfs node, Debian's 50-udev-default.rules: MODE 0664, GROUP lp
# for a printer; 70-accmon.rules sets no owner or mode, and 72-accmon-claims.rules only on a marked port), writes the
# udev database record 70-accmon.rules leads to (ACCMON_KIND, the tag accmon), and multicasts udevd's event for the
# device on the udev netlink group (files/send-uevent), which accmond takes as from udevd (root's, a multicast).
# The node's device number is /dev/full's (1:7): the helper checks the number through libudev, which asks the
# kernel's /sys/dev/char, and that knows no USB device in this container. libudev 252 opens no monitor at all when
# udevd seems not to run (no /run/udev/control, and /dev no devtmpfs, as in this container): the check makes
# udevd's control socket first. The exposure of both units is checked by 30-security and 97-node-helper; here, that
# both run as those checks scored them (no drop-in).

node=/dev/bus/usb/003/009
devpath=/devices/pci0000:00/0000:00:14.0/usb3/3-9
port=3-9
serial=CLAIM98
record=/run/udev/data/c1:7
shared=$scratch/claims # where the claimers' commands say what they did
claim_broken_id=502715a4fe8f44a2b49e91a33469d777
node_change_id=8b9bd0be8bb04e6eafcca9fe1a13b197

# --- accmond as shipped, with a udev monitor ---------------------------------------------------------------------
if [ -f /etc/systemd/system/accmond.service.d/50-systemd-test.conf ]; then
  remove_dropin accmond.service 50-systemd-test # the earlier checks' --simulate: not wanted here
fi
install_test_files claims
made_control=0
if [ ! -e /run/udev/control ]; then
  # What systemd-udevd-control.socket makes (ListenSequentialPacket=, mode 0600); only its presence matters here.
  mkdir -p /run/udev && python3 -c \
    'import socket; socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET).bind("/run/udev/control")' &&
    chmod 0600 /run/udev/control && made_control=1
  info "made /run/udev/control (udevd's control socket): libudev opens no monitor without it here"
fi
systemctl stop accmon-nodes.service 2>/dev/null # (it warns that its socket can start it again: the point)
expect "accmon-nodes.service is stopped, its socket listens: the claim is to start it" \
  "$(systemctl is-active accmon-nodes.service) $(systemctl is-active accmon-nodes.socket)" "inactive active"
check "systemctl restart accmond.service (as shipped, plus the manifest drop-in 98-claims-test.json)" \
  systemctl restart accmond.service
accmond_pid=$(main_pid)
expect "accmond.service and accmon-nodes.service run without drop-ins (as 30-security and 97 scored them)" \
  "$(prop accmond.service DropInPaths)|$(prop accmon-nodes.service DropInPaths)" "|"
expect "accmond runs the shipped command line" "$(tr '\0' ' ' <"/proc/$accmond_pid/cmdline" | sed 's/ $//')" \
  "$(shipped_exec_start)"
expect "... as its user accmond, with no capability (CapEff)" \
  "$(stat -c %U "/proc/$accmond_pid") $(sed -n 's/^CapEff:\t//p' "/proc/$accmond_pid/status")" \
  "accmond 0000000000000000"

# --- the device: its node, its udev record, its event ------------------------------------------------------------
mkdir -p "$(dirname "$node")" && rm -f "$node" && mknod "$node" c 1 7 && chown root:lp "$node" && chmod 0664 "$node"
mkdir -p /run/udev/data
printf 'I:%s\nE:ACCMON_REMOVABLE=removable\nE:ACCMON_KIND=usb\nG:accmon\nQ:accmon\nV:1\n' \
  "$(awk '{ printf "%d", $1 * 1000000 }' /proc/uptime)" >"$record"
mkdir -p "$shared" && chmod 1777 "$shared" && rm -f "$shared"/*
sees_own_dev_only() { [ -c "/proc/$accmond_pid/root/dev/null" ] && [ ! -e "/proc/$accmond_pid/root$node" ]; }
check "accmond does not see the node: it has a /dev of its own (PrivateDevices=yes)" sees_own_dev_only

# uevent ACTION SEQNUM: udevd's event for the device, with the properties udev's rules (usb_id, 70-accmon.rules)
# give a USB printer; not the systemd tag, which would have the container's systemd act on it.
uevent() {
  /testdata/harness/files/send-uevent "$1" "$devpath" usb "$2" DEVNAME="$node" DEVTYPE=usb_device DRIVER=usb \
    PRODUCT=1209/c1a1/100 TYPE=0/0/0 BUSNUM=003 DEVNUM=009 MAJOR=189 MINOR=264 USEC_INITIALIZED=4242424 \
    ID_BUS=usb ID_VENDOR=accmon ID_VENDOR_ENC=accmon ID_VENDOR_ID=1209 ID_MODEL=Label_Printer \
    'ID_MODEL_ENC=Label\x20Printer' ID_MODEL_ID=c1a1 ID_REVISION=0100 ID_SERIAL=accmon_Label_Printer_$serial \
    ID_SERIAL_SHORT=$serial ID_USB_INTERFACES=:070102: ID_PATH=pci-0000:00:14.0-usb-0:9 \
    ID_PATH_TAG=pci-0000_00_14_0-usb-0_9 ACCMON_REMOVABLE=removable ACCMON_KIND=usb TAGS=:accmon: CURRENT_TAGS=:accmon:
}
# accessory: "KIND VENDOR:PRODUCT NODES ACCESSORY-ID" of the test's accessory in `accmon list --json`, or nothing.
accessory() {
  accmon list --json | python3 -c '
import json, sys
for a in json.load(sys.stdin)["accessories"]:
    if a.get("serialNumber") == sys.argv[1]:
        print(a["kind"], a["vendorID"] + ":" + a["productID"], ",".join(a["deviceNodes"]), a["accessoryID"])' "$serial"
}
listed() { [ -n "$(accessory)" ]; }

start=$(cursor)
check "send-uevent: udevd's add event for $devpath, as root on the udev netlink group" uevent add 9801
if wait_for 10 listed; then
  pass "accmon list shows it: $(accessory)"
else
  fail "accmon list shows the accessory of the event (serial $serial)"
  journal_after "$start" -u accmond -o cat | indent
fi
accessory_id=$(accessory | cut -d' ' -f4)
expect "... a usb accessory 1209:c1a1 whose device node is $node" "$(accessory | cut -d' ' -f1-3)" "usb 1209:c1a1 $node"

# --- a claim held while its command runs ------------------------------------------------------------------------
ensure_user accmon-claimer lp,accmon
ensure_user accmon-rival lp,accmon
ensure_user accmon-stranger
claimer_uid=$(id -u accmon-claimer)
# opens USER REDIRECTION: "opened" when USER opens the node (< for reading, <> for reading and writing), else why not.
opens() { as_user "$1" sh -c "exec 3$2$node && echo opened" 2>&1; }
refused() { grep -q 'Permission denied' <<<"$1"; }
# acl_of FILE: its access ACL as the kernel keeps it (the attribute system.posix_acl_access), entries as getfacl
# writes them (named ones by id), or "none" (getfacl is not in the container).
acl_of() {
  python3 - "$1" <<'EOF'
import os, struct, sys
try:
    data = os.getxattr(sys.argv[1], "system.posix_acl_access")
except OSError:
    sys.exit(print("none"))
tags = {0x01: "user::", 0x02: "user:", 0x04: "group::", 0x08: "group:", 0x10: "mask::", 0x20: "other::"}
entries = []
for tag, permissions, id in struct.iter_unpack("<HHI", data[4:]):
    bits = "".join(c if permissions & b else "-" for c, b in (("r", 4), ("w", 2), ("x", 1)))
    entries.append(tags[tag] + (f"{id}:" if tag in (0x02, 0x08) else "") + bits)
print(" ".join(entries))
EOF
}
node_state() { printf '%s %s' "$(stat -c '%U:%G %a' "$node")" "$(acl_of "$node")"; }
original="root:lp 664 none"
held="root:lp 660 user::rw- user:$claimer_uid:rw- group::--- mask::rw- other::---"
# request JSON: a request to the helper as accmond's user; prints the reply.
request() { setpriv --reuid=accmond --regid=accmon --init-groups -- /usr/lib/accmon/accmon-nodes --request "$1"; }
held_paths() { request '{"v":1,"id":1,"op":"held"}' | python3 -c 'import json, sys
print(" ".join(n["path"] for n in json.load(sys.stdin)["held"]["nodes"]))'; }
# claimer NAME REASON SCRIPT: `accmon claim --serial` as accmon-claimer in the background, its command `sh -c SCRIPT`;
# its output in $shared/NAME.out and .err. setpriv itself in the background, so that $! is accmon claim's pid.
claimer() {
  setpriv --reuid=accmon-claimer --regid=accmon-claimer --init-groups --reset-env -- \
    accmon claim --serial "$serial" --reason "$2" -- sh -c "$3" >"$shared/$1.out" 2>"$shared/$1.err" &
}

expect "before any claim the node is $original" "$(node_state)" "$original"
expect "... accmon-rival (in lp) opens it for reading and writing" "$(opens accmon-rival '<>')" opened
expect "... accmon-stranger (not in lp) for reading" "$(opens accmon-stranger '<')" opened

start=$(cursor)
claimer first "systemd test: first claim" \
  "exec 3<>\"\$ACCMON_CLAIM_NODE\" && echo \"\$ACCMON_CLAIM_NODE\" >$shared/holding &&
   while [ ! -e $shared/done ]; do sleep 0.1; done; exit 7"
first=$!
if wait_for 20 test -s "$shared/holding"; then
  pass "accmon claim --serial $serial as accmon-claimer (in lp): its command runs and opens the node for writing"
else
  fail "accmon claim --serial $serial as accmon-claimer: its command runs and opens the node for writing"
  indent <"$shared/first.err"
  journal_after "$start" -u accmond -u accmon-nodes -o cat | indent
fi
expect "... ACCMON_CLAIM_NODE is $node" "$(cat "$shared/holding" 2>/dev/null)" "$node"
refute "... accmon claim does not say the node was left alone (no 'no device node is enforced')" \
  grep 'no device node is enforced' "$shared/first.err"
expect "accmon-nodes.service was started through its socket" "$(systemctl is-active accmon-nodes.service)" active
helper_pid=$(prop accmon-nodes.service MainPID)
expect "... as root with CAP_CHOWN and CAP_FOWNER alone (CapEff)" \
  "$(stat -c %U "/proc/$helper_pid") $(sed -n 's/^CapEff:\t//p' "/proc/$helper_pid/status")" "root 0000000000000009"
check "... and held the node at accmond's request (journal, nodeChange)" \
  journal_has "$start" "hold: $node: applied" -u accmon-nodes MESSAGE_ID=$node_change_id
expect "while held, the node is root's, lp and others have nothing, an ACL entry gives accmon-claimer rw" \
  "$(node_state)" "$held"
output=$(opens accmon-rival '<>')
check "... another member of lp (accmon-rival) gets EACCES for reading and writing: '$output'" refused "$output"
output=$(opens accmon-rival '<')
check "... and for reading: '$output'" refused "$output"
output=$(opens accmon-stranger '<')
check "... accmon-stranger gets EACCES for reading: '$output'" refused "$output"
expect "... another process of the holder opens it for reading and writing" "$(opens accmon-claimer '<>')" opened
expect "... root opens it" "$(exec 3<>"$node" && echo opened)" opened
check "... its USB port is marked for 72-accmon-claims.rules (/run/accmon-nodes/ports/$port)" \
  test -e "/run/accmon-nodes/ports/$port"
claims=$(as_user accmon-rival accmon claims --json | python3 -c 'import json, sys
for c in json.load(sys.stdin)["claims"]:
    h = c["holder"]
    print(h["user"], h["uid"], h["pid"], ",".join(c["accessoryIDs"]), c["reason"])')
expect "accmon claims, as accmon-rival, names the holder: user, uid, pid of accmon claim, accessory, reason" \
  "$claims" "accmon-claimer $claimer_uid $first $accessory_id systemd test: first claim"
output=$(as_user accmon-rival accmon claim --serial "$serial" -- true 2>&1)
status=$?
expect "accmon-rival's own accmon claim exits 75 (held)" "$status" 75
check "... naming the holder: '$output'" grep -q accmon-claimer <<<"$output"
check "... and the holder is told who asked" wait_for 5 grep -q 'accmon-rival.*asked for' "$shared/first.err"

touch "$shared/done"
wait "$first"
expect "when its command exits, accmon claim exits with the command's status (7)" "$?" 7
at_exit=$(node_state)
# accmond answers `release` before the helper has restored the node (tens of milliseconds later): accmon claim may
# exit while the node is still held. Said when seen; the restore itself must come, exactly.
[ "$at_exit" = "$original" ] || info "when accmon claim exited, the node was still '$at_exit'"
restored() { [ "$(node_state)" = "$original" ]; }
wait_for 5 restored
expect "the node is exactly as before: $original (no ACL left)" "$(node_state)" "$original"
expect "... accmon-rival opens it again for reading and writing" "$(opens accmon-rival '<>')" opened
expect "... accmon-stranger for reading" "$(opens accmon-stranger '<')" opened
expect "... the helper holds nothing" "$(held_paths)" ""
check "... and the port is unmarked" test ! -e "/run/accmon-nodes/ports/$port"

# --- a second claim, broken by root ----------------------------------------------------------------------------
# setpriv itself in the background, so that $! is the pid that becomes sleep.
setpriv --reuid=accmon-stranger --regid=accmon-stranger --init-groups --reset-env -- \
  sh -c "exec 3<$node; exec sleep 60" &
opener=$!
sleeping() { [ "$(cat "/proc/$opener/comm" 2>/dev/null)" = sleep ]; }
wait_for 5 sleeping
claimer second "systemd test: second claim" "echo \$\$ >$shared/second-pid; exec sleep 60"
second=$!
check "a second claim by accmon-claimer runs its command" wait_for 20 test -s "$shared/second-pid"
command_pid=$(cat "$shared/second-pid" 2>/dev/null)
# The user by name when accmond knows it already (names are looked up off its loop), else by uid.
named="accmon claim named the process that had the node open: pid $opener (sleep) of accmon-stranger, by name or uid"
if grep -qE "^accmon: claim: $node was open already: pid $opener \(sleep\) of (accmon-stranger|uid $(id -u accmon-stranger));" \
  "$shared/second.err"; then
  pass "... $named: '$(grep 'open already' "$shared/second.err")'"
else
  fail "... $named"
  indent <"$shared/second.err"
fi
expect "... the node is held for accmon-claimer again" "$(node_state)" "$held"
reason="systemd test: the bench is needed"
start=$(cursor)
check "root breaks it: accmon release $accessory_id --force --reason '$reason'" \
  accmon release "$accessory_id" --force --reason "$reason"
ended() { ! kill -0 "$second" 2>/dev/null; }
check "... which ends that accmon claim" wait_for 15 ended
wait "$second"
expect "... with status 75" "$?" 75
check "... after ending its command (pid $command_pid, SIGTERM)" test ! -e "/proc/$command_pid"
check "... saying by whom and why" grep -q "broken by root.*\"$reason\"" "$shared/second.err"
check "the journal has the break (MESSAGE_ID of claimBroken, CLAIM_BREAK_REASON)" \
  journal_has "$start" "\"CLAIM_BREAK_REASON\":\"$reason\"" -u accmond -o json MESSAGE_ID=$claim_broken_id
wait_for 5 restored
expect "the node is exactly as before again: $original" "$(node_state)" "$original"
# accmond asked the helper to cut what had the node open (accmon-stranger's sleep): re-authorizing the USB device,
# which this container has not (the node's number is /dev/full's), so the helper says it cannot.
info "$(journal_after "$start" -u accmon-nodes -o cat | grep "^cut: ")"
stop_background "$opener"

# --- unplugged ----------------------------------------------------------------------------------------------------
not_listed() { ! listed; }
check "send-uevent: udevd's remove event" uevent remove 9802
check "... accmon list no longer shows the accessory" wait_for 10 not_listed

rm -f "$node" "$record" /etc/accmon/manifest.d/98-claims-test.json
rmdir -p "$(dirname "$node")" 2>/dev/null
rm -rf "$shared"
[ "$made_control" = 1 ] && rm -f /run/udev/control
