#!/usr/bin/env bash
# `make run`: accmond with the example manifest on a local socket, and a live `accmon watch --all`.
# On a host whose udev daemon runs, accmond watches the real machine (plug something in; Ctrl-C to stop).
# Elsewhere (a container, a CI machine: no udev events), the scripted demo plays its plug events through a umockdev
# testbed, on the same real libudev path.
set -euo pipefail
bin=${1:?usage: run.sh BUILD_BIN_DIR}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ ! -S /run/udev/control ]; then
  exec "$here/umockdev-demo.sh" "$bin"
fi

work=$(mktemp -d /tmp/accmon-run.XXXXXX)
socket="$work/accmon.sock"
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
trap 'exit 0' INT TERM
echo "== accmond on $socket, watching this machine's udev, manifest docs/examples/manifest.json (log: $work/accmond.log)"
"$bin/accmond" --socket "$socket" --manifest "$here/../docs/examples/manifest.json" \
  --manifest-dir "$work/manifest.d" --state-dir "$work/state" 2>"$work/accmond.log" &
for _ in $(seq 100); do [ -S "$socket" ] && break; sleep 0.05; done
[ -S "$socket" ] || { echo "accmond did not start:" >&2; cat "$work/accmond.log" >&2; exit 1; }
if [ -t 0 ] && [ -t 1 ]; then
  echo "== accmon watch --all: plug an accessory in or out (rejected ones are marked); Ctrl-C to stop"
  "$bin/accmon" --socket "$socket" watch --all
else
  echo "== accmon watch --all for 5 s (not on a terminal)"
  timeout 5 "$bin/accmon" --socket "$socket" watch --all || true
fi
