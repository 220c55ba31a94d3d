# Sourced by run-check.sh inside the test container, before a check file: what check files use. The container is
# the booted bookworm of packaging/test-systemd.sh; this directory is /testdata/harness, the .deb
# /testdata/accmon.deb. Every wait here is bounded: a check never hangs (and its unit has RuntimeMaxSec= besides).
passed=0
failed=0
scratch=/run/accmon-test     # files the checks share (watch outputs, the hold flag); gone with the container
state_file=/var/lib/accmon/state.json
shipped_service=/usr/lib/systemd/system/accmond.service
mkdir -p "$scratch"

pass() { printf 'PASS: %s\n' "$*"; passed=$((passed + 1)); }
fail() { printf 'FAIL: %s\n' "$*"; failed=$((failed + 1)); }
info() { printf '     %s\n' "$*"; }
indent() { sed 's/^/    /' | tail -"${1:-30}"; }

# check NAME COMMAND...: PASS when the command succeeds, FAIL with its output otherwise.
check() {
  local name=$1 output
  shift
  if output=$("$@" 2>&1); then pass "$name"; else fail "$name"; printf '%s\n' "$output" | indent; fi
}

# refute NAME COMMAND...: PASS when the command fails, FAIL with its output otherwise.
refute() {
  local name=$1 output
  shift
  if output=$("$@" 2>&1); then fail "$name"; printf '%s\n' "$output" | indent; else pass "$name"; fi
}

# stop_background PID [SIGNAL]: ends a process the check started with &, and reaps it (without bash's notice).
stop_background() { { kill -"${2:-TERM}" "$1" && wait "$1"; } 2>/dev/null; }

# expect NAME ACTUAL EXPECTED: PASS when they are equal, FAIL showing both otherwise.
expect() {
  if [ "$2" = "$3" ]; then pass "$1"; else fail "$1"; printf 'got:      %s\nexpected: %s\n' "$2" "$3" | indent; fi
}

# wait_for SECONDS COMMAND...: runs COMMAND every 50 ms until it succeeds (0) or SECONDS have passed (1).
wait_for() {
  local deadline=$(($(date +%s%N) + $1 * 1000000000))
  shift
  until "$@"; do
    [ "$(date +%s%N)" -lt "$deadline" ] || return 1
    sleep 0.05
  done
}

# prop UNIT PROPERTY: the property's value (systemctl show -P).
prop() { systemctl show -P "$2" "$1"; }
main_pid() { prop accmond.service MainPID; }
is_active() { [ "$(systemctl is-active "$1")" = active ]; }

# cursor: writes a mark into the journal and prints its cursor, once journald has stored it.
# journal_after CURSOR [ARGS...]: the entries from that mark on (journalctl ARGS). It reads from the mark itself
# (--cursor), not after it: with a filter such as -u, systemd 252's --after-cursor skips the first matching entry
# when it is not the mark (systemd issue #30288, fixed in 255). The mark ("accmon-test: journal mark") is not from
# accmond and matches no check's pattern.
cursor() {
  local mark=$$-$SRANDOM
  printf 'MESSAGE=accmon-test: journal mark %s\nACCMON_TEST_MARK=%s\nSYSLOG_IDENTIFIER=accmon-test\n' "$mark" "$mark" |
    logger --journald
  marked() { journalctl -q -n 1 --show-cursor -o cat ACCMON_TEST_MARK="$mark" | sed -n 's/^-- cursor: //p' | grep .; }
  wait_for 5 marked
}
journal_after() {
  local from=$1
  shift
  journalctl --no-pager -q --cursor="$from" "$@"
}
# journal_has CURSOR PATTERN [ARGS...]: whether an entry from CURSOR on matches the extended regex PATTERN, within
# 5 s (journald stores what it receives a little later).
journal_has() { wait_for 5 journal_matches "$@"; }
journal_matches() {
  local from=$1 pattern=$2
  shift 2
  journal_after "$from" "$@" | grep -qE -- "$pattern"
}

# check_exposure UNIT: PASS when `systemd-analyze security` rates the unit (as loaded now, with its drop-ins) at
# most 2.0; FAIL with the settings it marks otherwise.
check_exposure() {
  local report exposure
  report=$(systemd-analyze security --no-pager "$1" 2>&1)
  exposure=$(sed -n "s/.*Overall exposure level for $1: \([0-9.]*\).*/\1/p" <<<"$report")
  if [ -n "$exposure" ] && awk -v e="$exposure" 'BEGIN { exit !(e <= 2.0) }'; then
    pass "systemd-analyze security $1: exposure $exposure (at most 2.0)"
  else
    fail "systemd-analyze security $1: exposure '${exposure:-?}' (at most 2.0)"
    grep -v '✓' <<<"$report" | indent 60
  fi
}

# dropin UNIT NAME: installs standard input as /etc/systemd/system/UNIT.d/NAME.conf and reloads systemd.
dropin() {
  mkdir -p "/etc/systemd/system/$1.d"
  cat >"/etc/systemd/system/$1.d/$2.conf"
  systemctl daemon-reload
}
remove_dropin() {
  rm -f "/etc/systemd/system/$1.d/$2.conf"
  systemctl daemon-reload
}

# shipped_exec_start: accmond.service's ExecStart= command line as the package ships it.
shipped_exec_start() { sed -n 's/^ExecStart=//p' "$shipped_service"; }

# ensure_user NAME [GROUPS]: a user without a home or a login shell, in GROUPS (comma-separated) when given; a user
# an earlier check made is added to GROUPS.
ensure_user() {
  if getent passwd "$1" >/dev/null; then
    [ -z "${2:-}" ] || usermod --append --groups "$2" "$1"
  else
    useradd --no-create-home --shell /usr/sbin/nologin ${2:+--groups "$2"} "$1"
  fi
}
# as_user NAME COMMAND...: COMMAND as NAME with NAME's groups, in a clean environment.
as_user() {
  local user=$1
  shift
  setpriv --reuid="$user" --regid="$user" --init-groups --reset-env -- "$@"
}

# install_test_files NAME: copies the tree files/NAME of this directory onto the container's / (test units, polkit
# rules, manifests: files/NAME/etc/... lands in /etc/...), owned by root with the modes it has here; reloads systemd
# when the tree has units.
install_test_files() {
  cp -r --preserve=mode "/testdata/harness/files/$1/." / || return
  if [ -d "/testdata/harness/files/$1/etc/systemd" ] || [ -d "/testdata/harness/files/$1/usr/lib/systemd" ]; then
    systemctl daemon-reload
  fi
}

# use_test_service: accmond.service as shipped plus a drop-in that adds --simulate (so that `accmon simulate`, as
# root, plugs accessories), shortens the watchdog to 4 s and allows no core dump, and the manifest drop-in of
# files/test-service, which admits the test accessories (vendors 0403 and 0781; others stay rejected). (Re)starts
# the service when either was not there yet.
use_test_service() {
  local changed=0
  if [ ! -f /etc/systemd/system/accmond.service.d/50-systemd-test.conf ]; then
    # LimitCORE=0: the watchdog's SIGABRT leaves no core, here or with a host's core_pattern helper.
    printf '[Service]\nExecStart=\nExecStart=%s --simulate\nWatchdogSec=4s\nLimitCORE=0\n' "$(shipped_exec_start)" |
      dropin accmond.service 50-systemd-test
    changed=1
  fi
  if [ ! -f /etc/accmon/manifest.d/50-systemd-test.json ]; then
    install_test_files test-service
    changed=1
  fi
  if [ "$changed" = 1 ] || ! is_active accmond.service; then
    systemctl restart accmond.service
  fi
}

# plug KIND VENDOR PRODUCT SERIAL NAME: connects a simulated accessory; prints its connection id.
plug() { accmon simulate connect --kind "$1" --vendor "$2" --product "$3" --serial "$4" --name "$5"; }
# sequence: the daemon's current sequence number (what `accmon list --json` is current to).
sequence() { accmon list --json | sed -n 's/.*"seq":\([0-9]*\).*/\1/p'; }
