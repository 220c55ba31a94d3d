#!/usr/bin/env bash
# `make test-package`: checks the .deb that `make deb` built. Needs root (chroot, mounts, namespaces), debootstrap,
# lintian and systemd's tools (the Makefile's deps-package target installs them).
#
# Usage: test-package.sh DEB BUILD_DIR [PYTHON_DEB [DASHBOARD_DEB]]
# PYTHON_DEB (default: python3-accmon_<version>_all.deb next to DEB) and DASHBOARD_DEB (default:
# accmon-dashboard_<version>_all.deb next to DEB) are linted, installed beside DEB and run too.
# Prints one PASS or FAIL line per check and a closing "N passed, N failed" line; exits non-zero on any failure.
set -uo pipefail
deb=$(realpath "${1:?usage: test-package.sh DEB BUILD_DIR}")
BUILD_DIR=$(realpath "${2:?usage: test-package.sh DEB BUILD_DIR}")
SWIFT=${SWIFT:-swift}
. "$(dirname "${BASH_SOURCE[0]}")/chroot-cache.sh"
work=$BUILD_DIR/package-test
root=$work/root
passed=0
failed=0
started=$(date +%s)

pass() { printf 'PASS: %s\n' "$*"; passed=$((passed + 1)); }
fail() { printf 'FAIL: %s\n' "$*"; failed=$((failed + 1)); }
check() {  # check NAME COMMAND...: PASS when the command succeeds, FAIL (with its output) otherwise
  local name=$1 output
  shift
  if output=$("$@" 2>&1); then pass "$name"; else fail "$name"; printf '%s\n' "$output" | sed 's/^/    /' | tail -30; fi
}
info() { printf '     %s\n' "$*"; }
finish() {
  printf '\npackage test: %s s\n' "$(($(date +%s) - started))"
  printf '%s passed, %s failed\n' "$passed" "$failed"
  [ "$failed" -eq 0 ]
  exit
}

[ "$(id -u)" = 0 ] || { fail "the package test needs root (chroot, mount, unshare)"; finish; }
cleanup() {
  [ -n "${dashboard:-}" ] && kill "$dashboard" 2>/dev/null
  [ -n "${activator:-}" ] && kill "$activator" 2>/dev/null
  [ -n "${collector:-}" ] && kill "$collector" 2>/dev/null
  for mount in "$root/sys" "$root/proc"; do mountpoint -q "$mount" && umount -l "$mount"; done
}
trap cleanup EXIT
cleanup  # mounts a killed run may have left
rm -rf --one-file-system "$work"
mkdir -p "$work"
stage=$work/extracted
dpkg-deb -x "$deb" "$stage"
version=$(dpkg-deb -f "$deb" Version)
info "$(basename "$deb"): $(stat -c %s "$deb") bytes; Depends: $(dpkg-deb -f "$deb" Depends)"
python_deb=$(realpath -m "${3:-$(dirname "$deb")/python3-accmon_${version}_all.deb}")
[ -f "$python_deb" ] || { fail "no Python package at $python_deb"; finish; }
python_stage=$work/extracted-python
dpkg-deb -x "$python_deb" "$python_stage"
info "$(basename "$python_deb"): $(stat -c %s "$python_deb") bytes; Depends: $(dpkg-deb -f "$python_deb" Depends)"
dashboard_deb=$(realpath -m "${4:-$(dirname "$deb")/accmon-dashboard_${version}_all.deb}")
[ -f "$dashboard_deb" ] || { fail "no dashboard package at $dashboard_deb"; finish; }
dashboard_stage=$work/extracted-dashboard
dpkg-deb -x "$dashboard_deb" "$dashboard_stage"
info "$(basename "$dashboard_deb"): $(stat -c %s "$dashboard_deb") bytes; Depends: $(dpkg-deb -f "$dashboard_deb" Depends)"

# --- lintian: no error, no warning (informational tags are listed, not failed) -----------------------------------
lint() {  # lint DEB: PASS when lintian reports no error and no warning
  local output status errors warnings
  output=$(lintian --fail-on error,warning --display-info "$1" 2>&1)
  status=$?
  output=$(printf '%s\n' "$output" | grep -v '^running with root privileges')
  printf '%s\n' "$output" | sed 's/^/     lintian: /'
  errors=$(printf '%s\n' "$output" | grep -c '^E: ' || true)
  warnings=$(printf '%s\n' "$output" | grep -c '^W: ' || true)
  if [ "$status" = 0 ] && [ "$errors" = 0 ] && [ "$warnings" = 0 ]; then
    pass "lintian $(basename "$1"): 0 errors, 0 warnings"
  else
    fail "lintian $(basename "$1"): $errors errors, $warnings warnings (exit $status)"
  fi
}
lint "$deb"
lint "$python_deb"
lint "$dashboard_deb"

# --- the Python package: Debian's dist-packages, no byte code, the pytest plugin's entry point ---------------------
python_site=$python_stage/usr/lib/python3/dist-packages
check "python3-accmon: Architecture all, Depends on python3" \
  test "$(dpkg-deb -f "$python_deb" Architecture)|$(dpkg-deb -f "$python_deb" Depends)" = "all|python3:any (>= 3.9~)"
check "python3-accmon: the modules and py.typed in /usr/lib/python3/dist-packages/accmon, no __pycache__" bash -c "
  test -f '$python_site/accmon/__init__.py' && test -f '$python_site/accmon/py.typed' &&
  ! find '$python_stage' -name __pycache__ -o -name '*.pyc' | grep -q ."
check "python3-accmon: the pytest11 entry point of accmon.testing" \
  grep -qx 'accmon.testing = accmon.testing' "$python_site/accmon-$version.dist-info/entry_points.txt"

# --- the dashboard: Debian's python3 and aiohttp, next to accmon, its unit hardened ----------------------------------
dashboard_site=$dashboard_stage/usr/lib/python3/dist-packages
check "accmon-dashboard: Architecture all, Depends on this accmon, python3 and python3-aiohttp" \
  test "$(dpkg-deb -f "$dashboard_deb" Architecture)|$(dpkg-deb -f "$dashboard_deb" Depends)" = \
  "all|accmon (= $version), python3:any (>= 3.9~), python3-aiohttp (>= 3.8)"
check "accmon-dashboard: /usr/bin/accmon-dashboard (beside /usr/bin/accmon), the modules and static files, no byte code" \
  bash -c "test -x '$dashboard_stage/usr/bin/accmon-dashboard' && test -f '$dashboard_site/accmon_dashboard/static/dashboard.js' &&
  ! find '$dashboard_stage' -name __pycache__ -o -name '*.pyc' | grep -q ."
dashboard_unit=$dashboard_stage/usr/lib/systemd/system/accmon-dashboard.service
check "systemd-analyze verify accmon-dashboard.service" \
  unshare -m sh -ec 'mount -t overlay overlay -o "lowerdir=$0/usr/bin:/usr/bin" /usr/bin
    MANPATH="$0/usr/share/man" exec systemd-analyze verify "$1"' "$dashboard_stage" "$dashboard_unit"
exposure=$(systemd-analyze security --offline=yes "$dashboard_unit" 2>&1 | sed -n 's/.*Overall exposure level for accmon-dashboard.service: \([0-9.]*\).*/\1/p')
if [ -n "$exposure" ] && awk -v e="$exposure" 'BEGIN { exit !(e <= 1.5) }'; then
  pass "systemd-analyze security --offline=yes accmon-dashboard.service: exposure $exposure (at most 1.5)"
else
  fail "systemd-analyze security --offline=yes accmon-dashboard.service: exposure '${exposure:-?}' (at most 1.5)"
fi
check "accmon-dashboard.service: DynamicUser=yes, SupplementaryGroups=accmon, no restart on a bad configuration" \
  grep -qzP 'RestartPreventExitStatus=64 65 69 77\n(.|\n)*DynamicUser=yes\nSupplementaryGroups=accmon\n' "$dashboard_unit"

# --- the binaries: static Swift runtime, stripped, hardened ----------------------------------------------------
for binary in usr/sbin/accmond usr/bin/accmon usr/sbin/accmon-mqtt usr/lib/accmon/accmon-nodes; do
  check "$binary: no Swift runtime library among its dependencies" \
    bash -c "! readelf -d '$stage/$binary' | grep NEEDED | grep -i swift"
  check "$binary: no RUNPATH" bash -c "! readelf -d '$stage/$binary' | grep -E 'RUNPATH|RPATH'"
  check "$binary: stripped" bash -c "! readelf -S '$stage/$binary' | grep -q '\.symtab'"
  check "$binary: does not import Foundation (only FoundationEssentials): under 20 MB" \
    test "$(stat -c %s "$stage/$binary")" -lt 20000000
done

# --- systemd units -------------------------------------------------------------------------------------------------
units=("$stage/usr/lib/systemd/system/accmond.socket" "$stage/usr/lib/systemd/system/accmond.service")
# verify checks the commands of ExecStart= and ExecReload= and the man pages of Documentation=: give it the
# package's binaries (read-only overlays of the package's /usr/sbin and /usr/bin on the host's, in a private mount
# namespace) and man pages (MANPATH).
check "systemd-analyze verify accmond.socket accmond.service" \
  unshare -m sh -ec 'for dir in /usr/sbin /usr/bin; do mount -t overlay overlay -o "lowerdir=$0$dir:$dir" "$dir"; done
    MANPATH="$0/usr/share/man" exec systemd-analyze verify "$@"' "$stage" "${units[@]}"
exposure=$(systemd-analyze security --offline=yes "${units[1]}" 2>&1 | sed -n 's/.*Overall exposure level for accmond.service: \([0-9.]*\).*/\1/p')
if [ -n "$exposure" ] && awk -v e="$exposure" 'BEGIN { exit !(e <= 2.5) }'; then
  pass "systemd-analyze security --offline=yes accmond.service: exposure $exposure (at most 2.5)"
else
  fail "systemd-analyze security --offline=yes accmond.service: exposure '${exposure:-?}' (at most 2.5)"
  systemd-analyze security --offline=yes "${units[1]}" 2>&1 | grep -v '✓' | sed 's/^/    /'
fi
check "accmond.service: Type=notify, ExecReload=, WatchdogSec=, a state directory" \
  grep -qzP 'Type=notify\n(.|\n)*ExecReload=(.|\n)*WatchdogSec=\d+(.|\n)*StateDirectory=accmon\n' "${units[1]}"
# /run/accmon is accmond.socket's; as a RuntimeDirectory= of the service, systemd would chown it to accmond's user and
# lock every client but root out (packaging/systemd-test/checks/10-socket-activation.sh).
check "accmond.service: no RuntimeDirectory=" bash -c "! grep -q '^RuntimeDirectory' '${units[1]}'"
check "systemd-analyze verify accmon-mqtt.service" \
  unshare -m sh -ec 'mount -t tmpfs tmpfs /usr/sbin; cp "$1/usr/sbin/accmon-mqtt" /usr/sbin/
    shift; MANPATH="$0/usr/share/man" exec systemd-analyze verify "$@"' "$stage" "$stage" \
    "$stage/usr/lib/systemd/system/accmon-mqtt.service"
bridge_unit=$stage/usr/lib/systemd/system/accmon-mqtt.service
exposure=$(systemd-analyze security --offline=yes "$bridge_unit" 2>&1 | sed -n 's/.*Overall exposure level for accmon-mqtt.service: \([0-9.]*\).*/\1/p')
if [ -n "$exposure" ] && awk -v e="$exposure" 'BEGIN { exit !(e <= 2.5) }'; then
  pass "systemd-analyze security --offline=yes accmon-mqtt.service: exposure $exposure (at most 2.5)"
else
  fail "systemd-analyze security --offline=yes accmon-mqtt.service: exposure '${exposure:-?}' (at most 2.5)"
fi
check "accmon-mqtt.service: the static user accmon-mqtt, group accmon, no restart on a bad configuration" \
  grep -qzP 'RestartPreventExitStatus=64 65\n(.|\n)*User=accmon-mqtt\nGroup=accmon\n' "$bridge_unit"
check "accmond.socket: /run/accmon/accmon.sock, group accmon, mode 0660" \
  grep -qzP 'ListenStream=/run/accmon/accmon.sock\n(.|\n)*SocketGroup=accmon\nSocketMode=0660\n' "${units[0]}"

units_dir=$stage/usr/lib/systemd/system
nodes_units=("$units_dir/accmon-nodes.socket" "$units_dir/accmon-nodes.service" "$units_dir/accmon-nodes-scan.socket"
  "$units_dir/accmon-nodes-scan.service")
check "systemd-analyze verify accmon-nodes.socket accmon-nodes.service accmon-nodes-scan.socket accmon-nodes-scan.service" \
  unshare -m sh -ec 'mkdir -p /usr/lib/accmon && mount -t overlay overlay -o "lowerdir=$0/usr/lib/accmon:/usr/lib/accmon" /usr/lib/accmon
    MANPATH="$0/usr/share/man" exec systemd-analyze verify "$@"' "$stage" "${nodes_units[@]}"
# The helper runs as root with two capabilities, the scanner as a dynamic user with two others; their exposure is
# reported and held to the daemon's bound.
for unit in "${nodes_units[1]}" "${nodes_units[3]}"; do
  name=$(basename "$unit")
  exposure=$(systemd-analyze security --offline=yes "$unit" 2>&1 | sed -n "s/.*Overall exposure level for $name: \([0-9.]*\).*/\1/p")
  if [ -n "$exposure" ] && awk -v e="$exposure" 'BEGIN { exit !(e <= 2.0) }'; then
    pass "systemd-analyze security --offline=yes $name: exposure $exposure (at most 2.0)"
  else
    fail "systemd-analyze security --offline=yes $name: exposure '${exposure:-?}' (at most 2.0)"
    systemd-analyze security --offline=yes "$unit" 2>&1 | grep -v '✓' | sed 's/^/    /'
  fi
done
check "accmon-nodes.service: exactly CAP_CHOWN CAP_FOWNER (no CAP_SYS_PTRACE, CAP_DAC_READ_SEARCH or CAP_SYS_ADMIN)" \
  grep -qx 'CapabilityBoundingSet=CAP_CHOWN CAP_FOWNER' "${nodes_units[1]}"
check "accmon-nodes-scan.service: a dynamic user with exactly CAP_DAC_READ_SEARCH CAP_SYS_PTRACE, no ptrace(2)" \
  grep -qzP 'DynamicUser=yes\n(.|\n)*CapabilityBoundingSet=CAP_DAC_READ_SEARCH CAP_SYS_PTRACE\n(.|\n)*~@privileged.*@debug\n' \
  "${nodes_units[3]}"
check "accmon-nodes.socket: /run/accmon-nodes.sock, accmond's alone (mode 0600)" \
  grep -qzP 'ListenStream=/run/accmon-nodes.sock\n(.|\n)*SocketUser=accmond\n(.|\n)*SocketMode=0600\n' "${nodes_units[0]}"
check "accmon-nodes-scan.socket: /run/accmon-nodes-scan.sock, root's alone (mode 0600)" \
  grep -qzP 'ListenStream=/run/accmon-nodes-scan.sock\n(.|\n)*SocketUser=root\n(.|\n)*SocketMode=0600\n' "${nodes_units[2]}"
check "the udev rule 72-accmon-claims.rules is shipped" test -f "$stage/usr/lib/udev/rules.d/72-accmon-claims.rules"

# --- man pages and completion --------------------------------------------------------------------------------------
for page in man8/accmond.8 man1/accmon.1 man5/accmon-manifest.5 man8/accmon-mqtt.8 man1/accmon-dashboard.1; do
  file=$stage/usr/share/man/$page.gz
  [ -f "$file" ] || file=$dashboard_stage/usr/share/man/$page.gz
  check "man page $page renders without warnings" bash -c \
    "test -f '$file' && test -z \"\$(LC_ALL=C.UTF-8 MANROFFSEQ='' MANWIDTH=80 man --warnings -E UTF-8 -l -Tutf8 -Z '$file' 2>&1 >/dev/null)\""
done
accmond_options=$("$stage/usr/sbin/accmond" --help | grep -oE '^ +--[a-z-]+' | tr -d ' ')
check "accmond(8) documents every option of accmond --help" bash -c \
  "text=\$(zcat '$stage/usr/share/man/man8/accmond.8.gz' | sed 's/\\\\-/-/g'); for o in $(echo $accmond_options); do grep -q -- \"\$o\" <<<\"\$text\" || { echo \"missing \$o\"; exit 1; }; done"
bridge_options=$("$stage/usr/sbin/accmon-mqtt" --help | grep -oE '^ +--[a-z-]+' | tr -d ' ')
check "accmon-mqtt(8) documents every option of accmon-mqtt --help" bash -c \
  "text=\$(zcat '$stage/usr/share/man/man8/accmon-mqtt.8.gz' | sed 's/\\\\-/-/g'); for o in $(echo $bridge_options); do grep -q -- \"\$o\" <<<\"\$text\" || { echo \"missing \$o\"; exit 1; }; done"
dashboard_options=$(PYTHONPATH=$dashboard_site /usr/bin/python3 "$dashboard_stage/usr/bin/accmon-dashboard" --help |
  grep -oE '^ +--[a-z-]+' | tr -d ' ')
check "accmon-dashboard(1) documents every option of accmon-dashboard --help ($(echo $dashboard_options | wc -w) options)" bash -c \
  "[ -n '$(echo $dashboard_options)' ] && text=\$(zcat '$dashboard_stage/usr/share/man/man1/accmon-dashboard.1.gz' | sed 's/\\\\-/-/g'); for o in $(echo $dashboard_options); do grep -q -- \"\$o\" <<<\"\$text\" || { echo \"missing \$o\"; exit 1; }; done"
accmon_commands=$("$stage/usr/bin/accmon" --help | sed -n '/^Commands:/,/^$/p' | awk 'NF > 1 { print $1 }')
check "accmon(1) documents every command of accmon --help" bash -c \
  "text=\$(zcat '$stage/usr/share/man/man1/accmon.1.gz'); for c in $(echo $accmon_commands); do grep -q \"^\\.SS accmon \$c\" <<<\"\$text\" || { echo \"missing \$c\"; exit 1; }; done"
completion=$stage/usr/share/bash-completion/completions/accmon
complete_words() {  # complete_words WORD...: what the completion offers for the last word, with the package's accmon
  bash -c '
    _init_completion() { cur=${COMP_WORDS[COMP_CWORD]}; prev=${COMP_WORDS[COMP_CWORD-1]}; words=("${COMP_WORDS[@]}"); cword=$COMP_CWORD; }
    _filedir() { :; }
    source "$0"; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _accmon; echo "${COMPREPLY[*]}"' "$completion" "$@"
}
check "bash completion offers every command of accmon --help" \
  test "$(complete_words "$stage/usr/bin/accmon" "")" = "$(echo $accmon_commands) help"
check "bash completion: 'accmon l' -> list, 'accmon simulate ' -> connect disconnect, 'accmon list --j' -> --json" \
  test "$(complete_words "$stage/usr/bin/accmon" l)|$(complete_words "$stage/usr/bin/accmon" simulate "")|$(
    complete_words "$stage/usr/bin/accmon" list --j)" = "list|connect disconnect|--json"

# --- the client library's source builds on its own -------------------------------------------------------------
client=$stage/usr/share/accmon/swift/AccmonClient
if command -v "$SWIFT" >/dev/null; then
  cp -r "$client" "$work/client"
  check "the shipped AccmonClient source package builds on its own" \
    "$SWIFT" build --package-path "$work/client" --scratch-path "$BUILD_DIR/client-check" --product AccmonClient
else
  fail "no swift ($SWIFT) to build the shipped AccmonClient source"
fi

. "$(dirname "${BASH_SOURCE[0]}")/test-package-chroot.sh"

finish
