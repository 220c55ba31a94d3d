#!/usr/bin/env bash
# `make run`: accmond on a temporary socket with the simulated source, a live `accmon watch`, and a scripted demo of
# plug events. On a terminal it keeps watching until Ctrl-C; otherwise it exits by itself after the demo.
set -euo pipefail
bin=${1:?usage: demo.sh BUILD_BIN_DIR}
work=$(mktemp -d /tmp/accmon-demo.XXXXXX)
export ACCMON_SOCKET="$work/accmon.sock"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 0' INT TERM

echo "== accmond on $ACCMON_SOCKET (simulated source; log: $work/accmond.log)"
"$bin/accmond" --socket "$ACCMON_SOCKET" --simulate --log-level info 2>"$work/accmond.log" &
pids+=($!)
for _ in $(seq 100); do [ -S "$ACCMON_SOCKET" ] && break; sleep 0.05; done
[ -S "$ACCMON_SOCKET" ] || { echo "accmond did not start:"; cat "$work/accmond.log"; exit 1; }

echo "== accmon watch (live events below)"
"$bin/accmon" watch &
pids+=($!)
sleep 0.3

step() { sleep "${DEMO_PAUSE:-0.6}"; echo "-- $*" >&2; }
sim() { "$bin/accmon" simulate "$@"; }

step "plug in an FTDI USB-serial adapter"
ftdi=$(sim connect --kind serial --vendor 0403 --product 6001 --name "FT232R USB UART" --manufacturer FTDI \
  --serial A50285BI --node /dev/ttyUSB0 --port 1-1.2 --protocol com.ftdi.uart)
step "pair a Bluetooth keyboard"
keyboard=$(sim connect --kind bluetooth-hid --vendor 05ac --product 0267 --name "Magic Keyboard" \
  --manufacturer Apple --serial 28:37:37:1a:2b:3c --node /dev/input/event7)
step "plug in a USB security key"
key=$(sim connect --kind usb --vendor 1050 --product 0407 --name "YubiKey OTP+FIDO+CCID" --manufacturer Yubico \
  --serial 12345678 --firmware 5.43 --port 1-3)
step "accmon list"
"$bin/accmon" list >&2
step "unplug the FTDI adapter"
sim disconnect "$ftdi"
step "replug it: same accessory id, new connection id"
sim connect --kind serial --vendor 0403 --product 6001 --name "FT232R USB UART" --manufacturer FTDI \
  --serial A50285BI --node /dev/ttyUSB0 --port 1-1.2 --protocol com.ftdi.uart >/dev/null
step "unplug the keyboard and the key"
sim disconnect "$keyboard"
sim disconnect "$key"
step "accmon status"
"$bin/accmon" status >&2

if [ -t 0 ] && [ -t 1 ]; then
  echo "== demo done; still watching (try: ACCMON_SOCKET=$ACCMON_SOCKET $bin/accmon simulate connect --kind usb). Ctrl-C to stop." >&2
  wait "${pids[1]}"
else
  sleep 0.3
  echo "== demo done" >&2
fi
