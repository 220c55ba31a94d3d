# The node helper under the container's systemd: accmon-nodes.socket started by the package, the helper
# socket-activated by accmond's user and serving it alone, the opener scanner socket-activated by the helper, neither
# able to write through /proc of a root process, a claim enforced on a node made with mknod as udev makes
# serial ports (root:dialout 0660), the node restored exactly, a restart that keeps what is held, and the helper's
# exposure. udevd does not run in the container: the udev database record of a device 70-accmon.rules marked is
# planted as udevd writes it, for the device number of /dev/null (1:3), which /sys/dev/char knows.

check_exposure accmon-nodes.service
check_exposure accmon-nodes-scan.service
expect "postinst enabled and started accmon-nodes.socket" \
  "$(systemctl is-enabled accmon-nodes.socket) $(systemctl is-active accmon-nodes.socket)" "enabled active"
expect "postinst enabled and started accmon-nodes-scan.socket" \
  "$(systemctl is-enabled accmon-nodes-scan.socket) $(systemctl is-active accmon-nodes-scan.socket)" "enabled active"
expect "/run/accmon-nodes.sock is accmond's, mode 0600" "$(stat -c '%F %U %a' /run/accmon-nodes.sock)" "socket accmond 600"
expect "/run/accmon-nodes-scan.sock is root's, mode 0600" "$(stat -c '%F %U %a' /run/accmon-nodes-scan.sock)" \
  "socket root 600"

node=/dev/ttyACCMONTEST
rm -f "$node" && mknod "$node" c 1 3 && chown root:dialout "$node" && chmod 0660 "$node"
mkdir -p /run/udev/data && printf 'E:ACCMON_KIND=serial\n' >/run/udev/data/c1:3
ensure_user accmon-holder dialout
ensure_user accmon-member dialout
holder_uid=$(id -u accmon-holder)
# request USER JSON: accmon-nodes --request as USER; prints the reply.
request() { setpriv --reuid="$1" --regid="$(id -g "$1")" --init-groups -- /usr/lib/accmon/accmon-nodes --request "$2"; }
hold="{\"v\":1,\"id\":1,\"op\":\"hold\",\"path\":\"$node\",\"holder\":{\"uid\":$holder_uid,\"gids\":[$(id -G accmon-holder | tr ' ' ',')],\"grant\":false}}"
opens() { as_user "$1" sh -c "exec 3<>$node && echo opened" 2>&1; }
# acl NODE: "acl" when ls marks the node with an ACL ('+' after the mode), "none" otherwise (getfacl is not here).
acl() { if [ "$(ls -l "$1" | cut -c11)" = + ]; then echo acl; else echo none; fi; }

expect "before the claim, a member of dialout opens the node" "$(opens accmon-member)" opened
start=$(cursor)
output=$(request accmond "$hold")
check "accmond's user holds the node for accmon-holder: '$output'" grep -q '"change":"applied"' <<<"$output"
expect "... which started accmon-nodes.service (socket activation)" "$(systemctl is-active accmon-nodes.service)" active
check "... and the journal says so (MESSAGE_ID of nodeChange)" \
  journal_has "$start" "hold: $node: applied" -u accmon-nodes MESSAGE_ID=8b9bd0be8bb04e6eafcca9fe1a13b197
helper_pid=$(prop accmon-nodes.service MainPID)
expect "the helper runs as root with CAP_CHOWN and CAP_FOWNER alone" \
  "$(stat -c %U "/proc/$helper_pid") $(sed -n 's/^CapEff:\t//p' "/proc/$helper_pid/status")" "root 0000000000000009"
expect "the helper pings its watchdog" "$(prop accmon-nodes.service WatchdogUSec)" 30s
# Where openat2 is refused (ENOSYS), the helper resolves nodes one component at a time and says so: systemd-nspawn
# 252's filter refuses it to everything in this container (the helper's own SystemCallFilter= allows it).
mkdir -p /run/accmon-test/openat2-probe
if /usr/lib/accmon/accmon-nodes --restore-all --state-directory /run/accmon-test/openat2-probe 2>&1 | grep -q 'openat2 is not available'; then
  info "openat2 is refused in this container (ENOSYS, outside the helper's unit too): the helper walks paths instead"
else
  info "openat2 works in this container"
fi
refused=$(opens accmon-member)
check "while held, another member of dialout gets EACCES: '$refused'" grep -q 'Permission denied' <<<"$refused"
expect "the holder opens it" "$(opens accmon-holder)" opened
expect "the node is root's with an ACL" "$(stat -c '%U:%G %a' "$node") $(acl "$node")" "root:dialout 660 acl"

# setpriv itself in the background (not a function), so that $! is the pid that becomes sleep.
setpriv --reuid=accmon-holder --regid=accmon-holder --init-groups --reset-env -- sh -c "exec 3<>$node; exec sleep 30" &
opener=$!
openers() { request accmond "{\"v\":1,\"id\":2,\"op\":\"openers\",\"path\":\"$node\"}" | grep -q "\"pid\":$opener,\"uid\":$holder_uid"; }
check "the helper names the process that has the node open (pid $opener, uid $holder_uid, sleep)" wait_for 5 openers
stop_background "$opener"
expect "... asking the scanner, socket-activated" "$(systemctl is-active accmon-nodes-scan.service)" active
scanner_pid=$(prop accmon-nodes-scan.service MainPID)
expect "the scanner runs as a dynamic user (not root) with CAP_DAC_READ_SEARCH and CAP_SYS_PTRACE alone" \
  "$([ "$(stat -c %u "/proc/$scanner_pid")" != 0 ] && echo not-root) $(sed -n 's/^CapEff:\t//p' "/proc/$scanner_pid/status")" \
  "not-root 0000000000080004"

# What a compromised helper or scanner could do, tried in each unit's own sandbox (a drop-in that runs a probe
# instead of the program): writing through /proc/1/root (PID 1 is root's) and opening /proc/1/mem for writing.
mkdir -p /run/accmon-test
cat >/run/accmon-test/probe.sh <<'PROBE'
for target in /proc/1/root/run/accmon-escape /proc/1/mem; do
  if (exec 3>>"$target") 2>/dev/null; then echo "$target: written"; else echo "$target: refused"; fi
done
PROBE
chmod 0755 /run/accmon-test /run/accmon-test/probe.sh
for unit in accmon-nodes.service accmon-nodes-scan.service; do
  dropin "$unit" 90-probe <<<"[Service]
Type=oneshot
ExecStart=
ExecStart=/bin/sh /run/accmon-test/probe.sh"
  systemctl stop "$unit" >/dev/null 2>&1  # it runs already (socket-activated): start would do nothing
  start=$(cursor)
  systemctl start "$unit" >/dev/null 2>&1
  check "$unit's sandbox cannot write through /proc/1/root" \
    journal_has "$start" '/proc/1/root/run/accmon-escape: refused' -u "$unit"
  check "$unit's sandbox cannot open /proc/1/mem for writing" journal_has "$start" '/proc/1/mem: refused' -u "$unit"
  remove_dropin "$unit" 90-probe
  systemctl stop "$unit" >/dev/null 2>&1
done
refute "nothing escaped to the container's /run" test -e /run/accmon-escape
# The same probe with the helper's former capabilities (CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH besides): it escapes,
# so the probe can tell.
dropin accmon-nodes.service 90-probe <<<"[Service]
Type=oneshot
ExecStart=
ExecStart=/bin/sh /run/accmon-test/probe.sh
CapabilityBoundingSet=CAP_CHOWN CAP_FOWNER CAP_DAC_READ_SEARCH CAP_SYS_PTRACE"
systemctl stop accmon-nodes.service >/dev/null 2>&1
start=$(cursor)
systemctl start accmon-nodes.service >/dev/null 2>&1
check "with CAP_SYS_PTRACE (its former set), the helper's sandbox writes through /proc/1/root" \
  journal_has "$start" '/proc/1/root/run/accmon-escape: written' -u accmon-nodes.service
remove_dropin accmon-nodes.service 90-probe
systemctl stop accmon-nodes.service >/dev/null 2>&1
rm -f /run/accmon-escape

output=$(request root '{"v":1,"id":3,"op":"held"}')
check "root is refused by the helper (it serves accmond alone): '$output'" grep -q '"code":"not-permitted"' <<<"$output"
refute "accmon-member cannot even connect to the helper's socket" request accmon-member '{"v":1,"id":4,"op":"held"}'
rm -f /run/udev/data/c1:3
output=$(request accmond "$hold")
check "without the udev mark, the helper refuses the node: '$output'" grep -q '"code":"not-marked"' <<<"$output"
printf 'E:ACCMON_KIND=serial\n' >/run/udev/data/c1:3

check "a restart of accmon-nodes.service" systemctl restart accmon-nodes.service
output=$(request accmond '{"v":1,"id":7,"op":"held"}')
check "... keeps what it holds (/run/accmon-nodes): '$output'" grep -q "\"path\":\"$node\"" <<<"$output"
# Which of the unit's settings refuses openat2: the helper says so at start when it must walk paths instead.
walks() { journal_has "$1" 'openat2 is not available' -u accmon-nodes; }
start=$(cursor)
systemctl restart accmon-nodes.service && request accmond '{"v":1,"id":9,"op":"held"}' >/dev/null
if walks "$start"; then
  start=$(cursor)
  dropin accmon-nodes.service 90-openat2 <<<$'[Service]\nRestrictSUIDSGID=no'
  systemctl restart accmon-nodes.service && request accmond '{"v":1,"id":10,"op":"held"}' >/dev/null
  if walks "$start"; then info "the helper walks paths: openat2 is refused by its unit, and not for RestrictSUIDSGID="
  else info "the helper walks paths: its unit's RestrictSUIDSGID=yes refuses openat2 (with =no it has openat2)"; fi
  remove_dropin accmon-nodes.service 90-openat2
  systemctl restart accmon-nodes.service
else
  info "the helper has openat2 under its unit"
fi
# The helper's watchdog: it pings from its loop, and a frozen helper (SIGSTOP) is replaced (WatchdogSec=2s for this).
dropin accmon-nodes.service 91-watchdog <<<$'[Service]\nWatchdogSec=2s\nLimitCORE=0'
systemctl restart accmon-nodes.service && request accmond '{"v":1,"id":11,"op":"held"}' >/dev/null
pinging=$(prop accmon-nodes.service MainPID)
restarts=$(prop accmon-nodes.service NRestarts)
sleep 5
expect "the helper pings its watchdog: still pid $pinging, not restarted, after 5 s of WatchdogSec=2s" \
  "$(prop accmon-nodes.service MainPID) $(prop accmon-nodes.service NRestarts)" "$pinging $restarts"
start=$(cursor)
kill -STOP "$pinging"
replaced() { local pid; pid=$(prop accmon-nodes.service MainPID); [ "$pid" != 0 ] && [ "$pid" != "$pinging" ]; }
check "a SIGSTOPped helper is replaced (systemd's watchdog)" wait_for 20 replaced
check "... 'Watchdog timeout' in the journal" journal_has "$start" 'accmon-nodes.service: Watchdog timeout' -u accmon-nodes.service
remove_dropin accmon-nodes.service 91-watchdog
systemctl restart accmon-nodes.service
output=$(request accmond '{"v":1,"id":12,"op":"held"}')
check "... and the new helper still holds the node (its records): '$output'" grep -q "\"path\":\"$node\"" <<<"$output"

output=$(request accmond "{\"v\":1,\"id\":8,\"op\":\"release\",\"path\":\"$node\"}")
check "release: '$output'" grep -q '"result":"restored"' <<<"$output"
expect "the node is exactly as before: root:dialout 0660, no ACL" "$(stat -c '%U:%G %a' "$node") $(acl "$node")" \
  "root:dialout 660 none"
expect "a member of dialout opens it again" "$(opens accmon-member)" opened
rm -f "$node" /run/udev/data/c1:3
