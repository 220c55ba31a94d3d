#!/bin/bash
# `make bench`: builds release binaries and the bench tools, then runs the measurements; one JSON line per
# measurement on stdout (progress on stderr). See bench/README.md.
#
#   BENCH_SUITES   which to run, of: stream fanout memory startup instructions sysfs python mqtt (default: all eight)
#   BENCH_MQTT_OUTAGE  seconds of the MQTT suite's broker outage (default 600)
#   BENCH_REPEATS  repeats of each measurement (default 3; at least 5 for start-up, 11 for fan-out)
#   BENCH_SCRATCH  the build directory (default /tmp/accmon-bench-build)
set -euo pipefail
cd "$(dirname "$0")/.."
SWIFT=${SWIFT:-swift}
SCRATCH=${BENCH_SCRATCH:-/tmp/accmon-bench-build}
SUITES=${BENCH_SUITES:-stream fanout memory startup instructions sysfs python mqtt}
REPEATS=${BENCH_REPEATS:-3}

# What the bench needs beyond the build: umockdev and its Python binding (the testbed), udevadm (the baseline), cc,
# libudev's headers (the relay), valgrind (instruction counts), mosquitto and its clients (the MQTT suite).
packages="umockdev gir1.2-umockdev-1.0 python3-gi udev gcc libudev-dev valgrind mosquitto mosquitto-clients libmosquitto-dev"
missing=$(for p in $packages; do dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed' || echo "$p"; done)
if [ -n "$missing" ]; then
    echo "bench: installing $missing" >&2
    if [ "$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi
    $SUDO apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >&2
fi

echo "bench: building release binaries in $SCRATCH" >&2
$SWIFT build -c release --scratch-path "$SCRATCH" >&2
$SWIFT build -c release --package-path bench/client --scratch-path "$SCRATCH-client" >&2
TOOLS="$SCRATCH/bench-tools"
mkdir -p "$TOOLS"
cc -O2 -Wall -o "$TOOLS/uevent_blast" bench/tools/uevent_blast.c
cc -O2 -Wall -o "$TOOLS/stamp" bench/tools/stamp.c
cc -O2 -Wall -pthread -o "$TOOLS/fanout" bench/tools/fanout.c
cc -O2 -Wall -o "$TOOLS/relay" bench/tools/relay.c -ludev
cc -O2 -Wall -o "$TOOLS/sysfs_read" bench/tools/sysfs_read.c
BIN="$SCRATCH/release"
CLIENT="$SCRATCH-client/release/accmon-bench-client"

for suite in $SUITES; do
    echo "bench: $suite" >&2
    case $suite in
        stream) /usr/bin/python3 bench/udev_stream.py "$BIN" "$TOOLS" "$CLIENT" --repeats "$REPEATS" ;;
        fanout) /usr/bin/python3 bench/fanout.py "$BIN" "$TOOLS" --repeats "$(( REPEATS > 11 ? REPEATS : 11 ))" ;;
        memory) /usr/bin/python3 bench/memory.py "$BIN" --repeats "$REPEATS" ;;
        startup) /usr/bin/python3 bench/startup.py "$BIN" --repeats "$(( REPEATS > 5 ? REPEATS : 5 ))" ;;
        instructions) /usr/bin/python3 bench/instructions.py "$BIN" "$TOOLS" "$CLIENT" ;;
        sysfs) /usr/bin/python3 bench/sysfs_read.py "$TOOLS" --repeats "$REPEATS" ;;
        python) /usr/bin/python3 bench/python_client.py "$BIN" "$TOOLS" --repeats "$REPEATS" ;;
        mqtt) /usr/bin/python3 bench/mqtt.py "$BIN" "$TOOLS" --repeats "$REPEATS" \
                --outage-seconds "${BENCH_MQTT_OUTAGE:-600}" ;;
        *) echo "bench: unknown suite '$suite' (stream fanout memory startup instructions sysfs python mqtt)" >&2; exit 64 ;;
    esac
done
