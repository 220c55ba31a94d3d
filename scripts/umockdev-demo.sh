#!/usr/bin/env bash
# The `make run` demo on the real libudev path: accmond watches udev in a umockdev testbed (a fake sysfs with uevents,
# Tests/umockdev/testbed.py), `accmon watch` shows what it publishes, and a short story plugs and unplugs realistic
# devices. On a terminal it keeps watching until Ctrl-C; otherwise it exits by itself after the demo.
#
# Usage: scripts/umockdev-demo.sh BUILD_BIN_DIR     (DEMO_PAUSE=seconds between steps, default 0.6)
# Needs umockdev (apt-get install umockdev gir1.2-umockdev-1.0 python3-gi), and unshare (util-linux) with user
# namespaces enabled when not run as root.
set -euo pipefail
bin=${1:?usage: umockdev-demo.sh BUILD_BIN_DIR}
bin=$(cd "$bin" && pwd)
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
harness_py="$here/../Tests/umockdev/testbed.py"
manifest="$here/../docs/examples/manifest.json"
pause=${DEMO_PAUSE:-0.6}

missing=()
# The network namespace: as root, a plain one; otherwise inside a user namespace of its own (unshare -r).
if [ "$(id -u)" = 0 ]; then unshare_flags=-n; else unshare_flags=-rn; fi
for tool in unshare umockdev-wrapper; do command -v "$tool" >/dev/null || missing+=("$tool"); done
/usr/bin/python3 -c "import gi; gi.require_version('UMockdev', '1.0'); from gi.repository import UMockdev" 2>/dev/null \
  || missing+=("/usr/bin/python3 with gi and UMockdev")
if [ ${#missing[@]} -gt 0 ]; then
  echo "umockdev-demo: missing: ${missing[*]}" >&2
  echo "  (Debian: apt-get install umockdev gir1.2-umockdev-1.0 python3-gi)" >&2
  exit 1
fi

work=$(mktemp -d /tmp/accmon-udev-demo.XXXXXX)
socket="$work/accmon.sock"
watch_pid=
harness_pid=
cleanup() {
  trap - EXIT INT TERM
  if [ -n "$watch_pid" ]; then kill "$watch_pid" 2>/dev/null || true; wait "$watch_pid" 2>/dev/null || true; fi
  if [ -n "$harness_pid" ]; then
    # EOF on its stdin: the harness stops accmond (SIGTERM), removes its testbed and exits.
    [ -n "${HARNESS[1]:-}" ] && eval "exec ${HARNESS[1]}>&-"
    for _ in $(seq 50); do kill -0 "$harness_pid" 2>/dev/null || break; sleep 0.1; done
    kill "$harness_pid" 2>/dev/null || true
  fi
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 0' INT TERM

echo "== accmond on $socket, watching udev in a umockdev testbed (logs: $work/accmond.log, $work/harness.log)"
# The harness runs in a private network namespace whose datagram queue is large enough for uevent bursts; accmond
# inherits the umockdev preload from it. The socket is a plain path, reachable from here.
coproc HARNESS {
  exec unshare $unshare_flags sh -c \
    'sysctl -qw net.unix.max_dgram_qlen=4096 && exec umockdev-wrapper /usr/bin/python3 "$0" "$@"' \
    "$harness_py" --accmond-log "$work/accmond.log" \
    "$bin/accmond" --socket "$socket" --simulate --log-level info --state-dir "$work/state" \
    --manifest "$manifest" --manifest-dir "$work/manifest.d" 2>"$work/harness.log"
}
harness_pid=$HARNESS_PID
for _ in $(seq 200); do [ -S "$socket" ] && break; sleep 0.05; done
if [ ! -S "$socket" ]; then
  echo "accmond did not start:" >&2
  cat "$work/harness.log" "$work/accmond.log" >&2 2>/dev/null || true
  exit 1
fi

# Sends one command to the harness and checks its reply.
harness() {
  local reply
  echo "$1" >&"${HARNESS[1]}"
  if ! IFS= read -r -t 30 reply <&"${HARNESS[0]}"; then
    echo "umockdev-demo: no reply from the harness to $1" >&2
    tail -n 20 "$work/harness.log" >&2
    exit 1
  fi
  case $reply in
    *'"ok": true'*) ;;
    *) echo "umockdev-demo: $1 failed: $reply" >&2; exit 1 ;;
  esac
}

echo "== accmon watch --all (live events below; the manifest is $manifest: rejected accessories are marked)"
"$bin/accmon" --socket "$socket" watch --all &
watch_pid=$!
sleep 0.3

step() { sleep "$pause"; echo "-- $*" >&2; }

step "plug in an FTDI USB-serial adapter: a usb and a serial accessory appear"
harness '{"op":"add","template":"ftdi","name":"ftdi"}'
step "pair a Bluetooth keyboard"
harness '{"op":"add","template":"btkbd","name":"keyboard","params":{"name":"Magic Keyboard"}}'
step "plug in a USB hub with two devices (the hub itself is not an accessory)"
harness '{"op":"add","template":"hub","name":"hub","params":{"children":[{"template":"usb","name":"stick","params":{"serial":"4C530001231115117143"}},{"template":"acm","name":"arduino"}]}}'
step "unplug the FTDI adapter"
harness '{"op":"remove","name":"ftdi"}'
step "unplug the hub, with everything on it"
harness '{"op":"remove","name":"hub"}'
harness '{"op":"sync"}'
step "accmon list"
sleep 0.2
"$bin/accmon" --socket "$socket" list --all >&2
step "accmon status"
"$bin/accmon" --socket "$socket" status >&2

if [ -t 0 ] && [ -t 1 ]; then
  echo "== demo done; still watching (accmond also runs with --simulate: try" \
    "\`$bin/accmon --socket $socket simulate connect --kind usb\`). Ctrl-C to stop." >&2
  wait "$watch_pid"
else
  sleep 0.3
  echo "== demo done" >&2
fi
