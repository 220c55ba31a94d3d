#!/bin/bash
# `make bench`: builds release binaries and the bench tools, then runs the suites (bench/suite.sh); one JSON line per
# measurement on stdout (progress on stderr). See bench/README.md.
#
#   BENCH_SUITES   which to run, of: stream fanout memory startup instructions sysfs python mqtt scale hostile history
#                  claims dashboard (default: all)
#   BENCH_REPEATS  repeats of each measurement (default 3; at least 5 for start-up, 11 for fan-out)
#   BENCH_SCRATCH  the build directory (default /tmp/accmon-bench-build)
#   BENCH_MQTT_OUTAGE, BENCH_FANOUT_COUNTS, BENCH_HOSTILE_SECONDS, BENCH_DASHBOARD_SECONDS, BENCH_SCALE_HOSTS,
#                  BENCH_SCALE_ACCESSORIES: see bench/suite.sh
set -euo pipefail
cd "$(dirname "$0")/.."
SWIFT=${SWIFT:-swift}
SCRATCH=${BENCH_SCRATCH:-/tmp/accmon-bench-build}
SUITES=${BENCH_SUITES:-$(bench/suite.sh list)}

bench/deps.sh
echo "bench: building release binaries in $SCRATCH" >&2
$SWIFT build -c release --scratch-path "$SCRATCH" >&2
$SWIFT build -c release --package-path bench/client --scratch-path "$SCRATCH-client" >&2
TOOLS="$SCRATCH/bench-tools"
bench/tools/build.sh "$TOOLS"
BIN="$SCRATCH/release"
CLIENT="$SCRATCH-client/release/accmon-bench-client"

for suite in $SUITES; do
    echo "bench: $suite" >&2
    bench/suite.sh run "$suite" "$BIN" "$TOOLS" "$CLIENT" "$PWD"
done
