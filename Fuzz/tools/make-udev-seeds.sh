#!/usr/bin/env bash
# Regenerates Fuzz/seeds/udev-monitor-message/: the datagrams umockdev's testbed (Tests/umockdev/testbed.py, real
# libudev underneath) sends for accmon's realistic devices (serial adapters, a CDC-ACM board, a Bluetooth keyboard, a
# USB stick with udev's own usb_id properties, a hub with children, a camera, a device with invalid UTF-8), plugged,
# bound, changed and unplugged, captured whole by Fuzz/tools/udev-capture.py. Root (a private network namespace).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=Fuzz/seeds/udev-monitor-message
rm -rf "$out"
commands='{"op":"start"}
{"op":"add","template":"ftdi","name":"ftdi","bind":true}
{"op":"add","template":"acm","name":"acm","bind":true}
{"op":"add","template":"btkbd","name":"kbd"}
{"op":"add","template":"usb","name":"stick","params":{"usb_id":true}}
{"op":"add","template":"hub","name":"hub","params":{"children":2}}
{"op":"add","template":"noserial","name":"mouse"}
{"op":"add","template":"internal","name":"camera"}
{"op":"add","template":"badutf8","name":"badutf8"}
{"op":"uevent","device":"stick","action":"change"}
{"op":"remove","name":"ftdi","keep":true}
{"op":"remove","name":"kbd","keep":true}
{"op":"quit"}'
# shellcheck disable=SC2016 # expanded by the inner shell
unshare -n sh -c 'sysctl -qw net.unix.max_dgram_qlen=4096 && exec umockdev-wrapper /usr/bin/python3 \
    Tests/umockdev/testbed.py --defer-start /usr/bin/python3 Fuzz/tools/udev-capture.py "$1"' _ "$out" \
    <<<"$commands" | grep -v '"ok": true' || true
echo "$(find "$out" -type f | wc -l) datagrams in $out"
