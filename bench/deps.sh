#!/bin/bash
# Installs what the bench needs beyond the Swift build, when missing: umockdev and its Python binding (the testbed),
# udevadm (the baseline), cc, libudev's and libcrypto's headers (the relay), valgrind (instruction counts), mosquitto and its clients
# (the MQTT suite), util-linux's setpriv and prlimit (the hostile suite), aiohttp, Chromium, chromedriver and selenium
# (the dashboard suite), GNU time and strace (the scale suite's peak RSS, CPU and system call count), dbus-daemon,
# libsystemd's and GLib's headers (the bus suite's private bus, its sd-bus and GDBus clients and its floor relay).
set -euo pipefail
packages="umockdev gir1.2-umockdev-1.0 python3-gi udev gcc libudev-dev libssl-dev valgrind mosquitto mosquitto-clients
libmosquitto-dev util-linux python3-aiohttp chromium chromium-driver python3-selenium time strace dbus libsystemd-dev
libglib2.0-dev"
missing=$(for p in $packages; do
    dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed' || echo "$p"
done)
if [ -n "$missing" ]; then
    echo "bench: installing" $missing >&2
    if [ "$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi
    $SUDO apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >&2
fi
