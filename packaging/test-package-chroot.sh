# shellcheck shell=bash
# Sourced by test-package.sh after its checks on the host: installs the packages in a bare Debian (debootstrap
# --variant=minbase bookworm, cached), runs accmond, the dashboard, the simulator and the node helper there, then purges
# and checks that nothing is left. Uses test-package.sh's variables (deb, python_deb, dashboard_deb, work, root,
# BUILD_DIR) and its check, pass, fail, info and finish.

# --- a bare Debian: debootstrap --variant=minbase bookworm, cached as a tarball ----------------------------------
cache=$BUILD_DIR/chroot-cache/bookworm-minbase.tar
if ! minbase_tarball "$BUILD_DIR/chroot-cache" "$work"; then
  fail "debootstrap --variant=minbase bookworm ($work/debootstrap.log)"
  tail -20 "$work/debootstrap.log" | sed 's/^/    /'
  finish
fi
mkdir -p "$root"
tar -C "$root" -xf "$cache"
mount -t proc proc "$root/proc"
mount -t sysfs -o ro sysfs "$root/sys"
in_root() { chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@"; }
snapshot() {  # every path in the chroot but the kernel's, dpkg's and apt's bookkeeping and logs
  (cd "$root" && find . -xdev \( -path ./proc -o -path ./sys -o -path ./dev -o -path ./var/lib/dpkg -o \
    -path ./var/lib/apt -o -path ./var/cache -o -path ./var/log -o -path ./tmp \) -prune -o -print | LC_ALL=C sort)
}
snapshot >"$work/before.txt"
groups_before=$(cut -d: -f1 "$root/etc/group" | sort | tr '\n' ' ')
users_before=$(cut -d: -f1 "$root/etc/passwd" | sort | tr '\n' ' ')

cp "$deb" "$python_deb" "$dashboard_deb" "$root/tmp/"
in_root dpkg -i "/tmp/$(basename "$deb")" "/tmp/$(basename "$python_deb")" "/tmp/$(basename "$dashboard_deb")" \
  >"$work/dpkg-i.log" 2>&1 ||
  info "dpkg -i left dependencies to apt-get -f install"
# Without recommends: python3 recommends ca-certificates, which apt itself recommends too, so autoremove would keep it
# after the purge below and the leftover check would see its files.
check "dpkg -i of the three packages plus apt-get -f install in a minbase chroot" \
  in_root apt-get -f install -y -q --no-install-recommends
for package in accmon python3-accmon accmon-dashboard; do
  check "$package is installed" bash -c "[ \"\$(chroot '$root' dpkg-query -W -f='\${Status}' $package)\" = 'install ok installed' ]"
done
check "python3-accmon: postinst byte-compiled the modules (py3compile)" \
  bash -c "ls '$root'/usr/lib/python3/dist-packages/accmon/__pycache__/session.*.pyc"
check "python3-accmon: import accmon in the chroot" bash -c \
  "[ \"\$(chroot '$root' python3 -c 'import accmon, accmon.simulator; print(accmon.__version__)')\" = '$version' ]"
check "postinst created the system group accmon" bash -c "chroot '$root' getent group accmon | grep -qE '^accmon:x:[0-9]{1,3}:'"
check "postinst created the system user accmond (group accmon, no login)" bash -c \
  "[ \"\$(chroot '$root' id -gn accmond) \$(chroot '$root' getent passwd accmond | cut -d: -f7)\" = 'accmon /usr/sbin/nologin' ]"
check "the package ships the polkit rule for accmond's user" test -f "$root/usr/share/polkit-1/rules.d/60-accmon.rules"
check "postinst enabled accmond.socket (deb-systemd-helper)" \
  test -L "$root/etc/systemd/system/sockets.target.wants/accmond.socket"
check "/etc/accmon/manifest.json is a conffile" bash -c "chroot '$root' dpkg-query -W -f='\${Conffiles}' accmon | grep -q /etc/accmon/manifest.json"
check "/etc/accmon/mqtt.json is a conffile" bash -c "chroot '$root' dpkg-query -W -f='\${Conffiles}' accmon | grep -q /etc/accmon/mqtt.json"
check "postinst created the static system user accmon-mqtt in the group accmon, without a shell" bash -c \
  "chroot '$root' getent passwd accmon-mqtt | grep -qE '^accmon-mqtt:x:[0-9]{1,3}:[0-9]+:.*:/nonexistent:/usr/sbin/nologin$' &&
   [ \"\$(chroot '$root' id -gn accmon-mqtt)\" = accmon ]"
check "accmon-mqtt.service is not enabled by the package" \
  bash -c "! ls '$root'/etc/systemd/system/*.wants/accmon-mqtt.service 2>/dev/null | grep -q ."
check "accmon-mqtt --check accepts the shipped mqtt.json, as the user accmon-mqtt" bash -c \
  "chroot --userspec=accmon-mqtt:accmon '$root' /usr/sbin/accmon-mqtt --check | grep -q '^ok: /etc/accmon/mqtt.json: broker mqtt://localhost:1883'"
check "accmon-mqtt --version in the chroot" bash -c "[ \"\$(chroot '$root' /usr/sbin/accmon-mqtt --version)\" = 'accmon-mqtt $version' ]"
check "the manifest allows nothing" grep -qE '^ *"default": "reject",' "$root/etc/accmon/manifest.json"
check "every library accmond, accmon, accmon-mqtt and accmon-nodes need is in the chroot, none of Swift's" bash -c "
  out=\$(chroot '$root' ldd /usr/sbin/accmond /usr/bin/accmon /usr/sbin/accmon-mqtt /usr/lib/accmon/accmon-nodes); echo \"\$out\"
  ! grep -qE 'not found|swift' <<<\"\$out\""
check "accmond --version in the chroot" bash -c "[ \"\$(chroot '$root' /usr/sbin/accmond --version)\" = 'accmond $version' ]"
check "accmon --version in the chroot" bash -c "[ \"\$(chroot '$root' /usr/bin/accmon --version)\" = 'accmon $version' ]"
check "accmon-nodes --version in the chroot" bash -c "[ \"\$(chroot '$root' /usr/lib/accmon/accmon-nodes --version)\" = 'accmon-nodes $version' ]"
check "postinst enabled accmon-nodes.socket (deb-systemd-helper)" \
  test -L "$root/etc/systemd/system/sockets.target.wants/accmon-nodes.socket"
check "postinst enabled accmon-nodes-scan.socket (deb-systemd-helper)" \
  test -L "$root/etc/systemd/system/sockets.target.wants/accmon-nodes-scan.socket"
check "accmon-dashboard: postinst byte-compiled the modules (py3compile)" \
  bash -c "ls '$root'/usr/lib/python3/dist-packages/accmon_dashboard/__pycache__/model.*.pyc"
check "/etc/accmon/dashboard.json is a conffile" bash -c "chroot '$root' dpkg-query -W -f='\${Conffiles}' accmon-dashboard | grep -q /etc/accmon/dashboard.json"
check "accmon-dashboard.service is not enabled by the package" \
  bash -c "! ls '$root'/etc/systemd/system/*.wants/accmon-dashboard.service 2>/dev/null | grep -q ."
check "accmon-dashboard --check accepts the shipped dashboard.json and finds accmon next to itself, as nobody" bash -c \
  "chroot --userspec=nobody:nogroup '$root' /usr/bin/accmon-dashboard --check | grep -qx 'ok: this host (.*), through /usr/bin/accmon; listen 127.0.0.1:8090; credentials: none'"

# --- accmond in the chroot under systemd-socket-activate, with NOTIFY_SOCKET --------------------------------------
mkdir -p "$root/run/accmon"
notify_log=$work/notify.log
python3 - "$root/run/notify" "$notify_log" <<'PY' &
import os, socket, sys
path, log = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(path)
with open(log, "a", buffering=1) as out:
    out.write("bound\n")
    while True:
        out.write(s.recv(65536).decode().replace("\n", " | ") + "\n")
PY
collector=$!
for _ in $(seq 200); do grep -q bound "$notify_log" 2>/dev/null && break; sleep 0.02; done
systemd-socket-activate -l "$root/run/accmon/accmon.sock" -E NOTIFY_SOCKET=/run/notify -E WATCHDOG_USEC=1000000 \
  chroot "$root" /usr/sbin/accmond >"$work/accmond.log" 2>&1 &
activator=$!
for _ in $(seq 200); do [ -S "$root/run/accmon/accmon.sock" ] && break; sleep 0.02; done
# The first connection makes systemd-socket-activate start accmond; the client waits in the backlog meanwhile.
check "accmon list in the chroot, through the activated socket" in_root accmon list
for _ in $(seq 500); do grep -q 'READY=1' "$notify_log" && break; sleep 0.02; done
check "accmond sent READY=1 to NOTIFY_SOCKET" grep -q 'READY=1' "$notify_log"
check "accmond said what it does (STATUS=)" grep -q 'STATUS=Serving' "$notify_log"
check "accmond serves the passed socket (socket activation)" grep -q 'socket from the service manager' "$work/accmond.log"
check "accmond runs inside the chroot" bash -c "[ \"\$(readlink /proc/$activator/root)\" = '$root' ]"
check "accmon status --json in the chroot" bash -c "chroot '$root' accmon status --json | grep -q '\"daemonVersion\":\"$version\"'"
check "python3 -m accmon list in the chroot: the same as accmon list" bash -c \
  "[ \"\$(chroot '$root' python3 -m accmon list)\" = \"\$(chroot '$root' accmon list)\" ]"
check "python3 -m accmon status --json in the chroot" bash -c \
  "chroot '$root' python3 -m accmon status --json | grep -q '\"daemonVersion\":\"$version\"'"
# The dashboard in the chroot, on this host's accmond (local mode), on a free port of the host's network.
dashboard_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
chroot "$root" env -i PATH=/usr/bin:/bin /usr/bin/accmon-dashboard --listen "127.0.0.1:$dashboard_port" \
  >"$work/dashboard.log" 2>&1 &
dashboard=$!
dashboard_answers() { python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' "$1" 2>/dev/null; }
for _ in $(seq 250); do dashboard_answers "http://127.0.0.1:$dashboard_port/healthz" && break; sleep 0.04; done
check "accmon-dashboard in the chroot: /healthz answers 200 (its accmon watch reads the activated accmond)" \
  dashboard_answers "http://127.0.0.1:$dashboard_port/healthz"
check "accmon-dashboard in the chroot: /metrics says the host is online" python3 -c '
import re, sys, urllib.request
text = urllib.request.urlopen(sys.argv[1], timeout=5).read().decode()
sys.exit(0 if re.search(r"^accmon_host_online\{host=\"[^\"]+\"\} 1$", text, re.M) else text)' \
  "http://127.0.0.1:$dashboard_port/metrics"
kill -TERM "$dashboard" 2>/dev/null
wait "$dashboard"
check "accmon-dashboard exits 0 on SIGTERM" test "$?" = 0
dashboard=
sed 's/^/     dashboard: /' "$work/dashboard.log" | head -4
check "python3 -m accmon wait --timeout 0.2 in the chroot: nothing is allowed, so exit 75" bash -c \
  "chroot '$root' python3 -m accmon wait --timeout 0.2; [ \$? = 75 ]"
# accmon.simulator (the pytest plugin's daemon) finds the packaged /usr/sbin/accmond off PATH, runs it with
# --simulate on a socket of its own, and a plugged accessory reaches a client.
check "python3-accmon: SimulatedDaemon runs /usr/sbin/accmond --simulate in the chroot; a plug reaches wait_for" \
  in_root env PATH=/usr/bin:/bin python3 -c '
import accmon
from accmon.simulator import SimulatedDaemon
with SimulatedDaemon() as daemon:
    assert daemon.accmond == "/usr/sbin/accmond", daemon.accmond
    daemon.plug(kind="serial", vendor="0403", product="6001", nodes=["/dev/ttyUSB0"])
    assert accmon.Client(daemon.socket).wait_for(kind="serial", timeout=5).device_node == "/dev/ttyUSB0"
'
sleep 1.2
check "WATCHDOG=1 pings at WATCHDOG_USEC=1000000" bash -c "[ \$(grep -c 'WATCHDOG=1' '$notify_log') -ge 2 ]"
kill -TERM "$activator"
for _ in $(seq 250); do kill -0 "$activator" 2>/dev/null || break; sleep 0.02; done
wait "$activator"
check "accmond exits 0 on SIGTERM" test "$?" = 0
activator=
check "accmond sent STOPPING=1" grep -q 'STOPPING=1' "$notify_log"
check "accmond left the activated socket in place" test -S "$root/run/accmon/accmon.sock"
kill "$collector" 2>/dev/null
wait "$collector" 2>/dev/null
collector=
rm -f "$root/run/notify"
sed 's/^/     notify: /' "$notify_log" | grep -v WATCHDOG | head -8
sed 's/^/     accmond: /' "$work/accmond.log" | head -8

# --- the node helper in the chroot: a node held for a claim, restored by prerm at removal --------------------------
# A node made with mknod as udev makes serial ports (root:dialout 0660), for the device number of /dev/null (which
# /sys/dev/char knows), and the udev database record udevd would write for a device 70-accmon.rules marked.
node=$root/dev/ttyACCMONTEST
rm -f "$node" && mknod "$node" c 1 3 && chown 0:20 "$node" && chmod 0660 "$node"
mkdir -p "$root/run/udev/data" && printf 'E:ACCMON_KIND=serial\n' >"$root/run/udev/data/c1:3"
systemd-socket-activate -l "$root/run/accmon-nodes.sock" chroot "$root" /usr/lib/accmon/accmon-nodes --allow-user accmond \
  >"$work/accmon-nodes.log" 2>&1 &
activator=$!
for _ in $(seq 200); do [ -S "$root/run/accmon-nodes.sock" ] && break; sleep 0.02; done
chmod 0666 "$root/run/accmon-nodes.sock"  # (accmon-nodes.socket makes it accmond's; here the peer check is tested)
hold='{"v":1,"id":1,"op":"hold","path":"/dev/ttyACCMONTEST","holder":{"uid":4001,"gids":[4001,20],"grant":false}}'
check "accmon-nodes refuses a user other than accmond (nobody)" bash -c \
  "out=\$(chroot --userspec=nobody:nogroup '$root' /usr/lib/accmon/accmon-nodes --request '$hold'); [ \$? = 1 ] && grep -q '\"not-permitted\"' <<<\"\$out\""
check "accmon-nodes holds a marked node for accmond's request" bash -c \
  "chroot --userspec=accmond:accmon '$root' /usr/lib/accmon/accmon-nodes --request '$hold' | grep -q '\"change\":\"applied\"'"
check "the held node is root's, the group dialout has no access, the holder (in dialout) keeps read and write" bash -c \
  "[ \"\$(stat -c '%u:%g' '$node') \$(getfacl --omit-header --numeric --absolute-names '$node' | grep -E '^(user:4001|group::)' | tr '\n' ' ')\" = '0:20 user:4001:rw- group::--- ' ]"
kill -TERM "$activator"  # as the prerm's stop of accmon-nodes.service would
wait "$activator" 2>/dev/null
activator=
sed 's/^/     accmon-nodes: /' "$work/accmon-nodes.log" | grep -v '^     accmon-nodes: \(Listening\|Communication\|Execing\)' | head -6
rm -f "$root/run/accmon-nodes.sock"

# --- purge ---------------------------------------------------------------------------------------------------------
check "dpkg --purge accmon-dashboard (prerm removes the byte code: py3clean)" in_root dpkg --purge accmon-dashboard
check "dpkg --purge python3-accmon (prerm removes the byte code: py3clean)" in_root dpkg --purge python3-accmon
check "dpkg --purge accmon" in_root dpkg --purge accmon
check "prerm restored the held node exactly (root:dialout 0660, no ACL)" bash -c \
  "[ \"\$(stat -c '%u:%g %a' '$node')\" = '0:20 660' ] && [ -z \"\$(getfacl --skip-base --absolute-names '$node' 2>&1)\" ]"
rm -f "$node" "$root/run/udev/data/c1:3"
rmdir "$root/run/udev/data" "$root/run/udev" 2>/dev/null
check "the package is gone from dpkg's database" bash -c "! chroot '$root' dpkg-query -W -f='\${Status}' accmon 2>/dev/null | grep -q ."
rm -f "$root/tmp/$(basename "$deb")" "$root/tmp/$(basename "$python_deb")" "$root/tmp/$(basename "$dashboard_deb")"
# What apt-get -f install pulled in for accmon (libssl3, for the descriptor hash) and the dashboard (python3-aiohttp)
# is marked automatic: autoremove takes it away again, as on any Debian system.
check "apt-get autoremove --purge removes the dependencies installed for accmon and the dashboard" \
  in_root apt-get autoremove --purge -y -q
snapshot >"$work/after.txt"
# The group and the users accmond and accmon-mqtt are kept on purpose (see debian/postrm); /etc/group, /etc/passwd
# and their shadows change with them.
leftovers=$(diff "$work/before.txt" "$work/after.txt" | grep '^[<>]' |
  grep -vE '^[<>] \./etc/(group|gshadow|passwd|shadow)-?$')
if [ -z "$leftovers" ]; then
  pass "dpkg --purge (and autoremove) removed every file installed and everything accmond made (only the group accmon and the users accmond and accmon-mqtt are kept)"
else
  fail "dpkg --purge left files behind or removed others:"
  printf '%s\n' "$leftovers" | head -20 | sed 's/^/    /'
fi
groups_after=$(cut -d: -f1 "$root/etc/group" | sort | tr '\n' ' ')
check "the only change to the groups is accmon" bash -c "[ \"$(printf '%s' "$groups_after" | sed 's/\baccmon \b//')\" = '$groups_before' ]"
users_after=$(cut -d: -f1 "$root/etc/passwd" | sort | tr '\n' ' ')
check "the only changes to the users are accmond and accmon-mqtt" \
  bash -c "[ \"$(printf '%s' "$users_after" | sed 's/\baccmond \b//; s/\baccmon-mqtt \b//')\" = '$users_before' ]"

