#!/bin/bash
# `make bench`: builds release binaries and the bench tools, then runs the suites (bench/suite.sh); one JSON line per
# measurement on stdout (progress on stderr), each tagged with the revision and the load (bench/lines.py tag). The
# lines also go to build/bench/<date>-<commit>-<suites>.jsonl, and their summary (bench/summarize.py) to
# bench/results/<the same name>.json. See bench/README.md.
#
#   BENCH_SUITES   which to run, of: stream fanout memory startup instructions sysfs python mqtt scale sites hostile
#                  history claims dashboard bus open (default: all)
#   BENCH_REPEATS  repeats of each measurement (default 3; at least 5 for start-up, 11 for fan-out)
#   BENCH_SCRATCH  the build directory (default /tmp/accmon-bench-build)
#   BENCH_OUT      the raw lines' file (default build/bench/<date>-<commit>-<suites>.jsonl: "bench" for every suite;
#                  the commit gets "-dirty" when the tree has changes not committed)
#   BENCH_MQTT_OUTAGE, BENCH_FANOUT_COUNTS, BENCH_HOSTILE_SECONDS, BENCH_DASHBOARD_SECONDS, BENCH_SCALE_HOSTS,
#                  BENCH_SCALE_ACCESSORIES: see bench/suite.sh
set -euo pipefail
cd "$(dirname "$0")/.."
SWIFT=${SWIFT:-swift}
SCRATCH=${BENCH_SCRATCH:-/tmp/accmon-bench-build}
SUITES=${BENCH_SUITES:-$(bench/suite.sh list)}
REVISION=$(git rev-parse HEAD)
NAME=$(date -u +%Y-%m-%d)-${REVISION:0:7}
git diff --quiet HEAD -- || NAME=$NAME-dirty
if [ "$SUITES" = "$(bench/suite.sh list)" ]; then NAME=$NAME-bench; else NAME=$NAME-$(echo $SUITES | tr ' ' '-'); fi
OUT=${BENCH_OUT:-build/bench/$NAME.jsonl}
mkdir -p "$(dirname "$OUT")"
: > "$OUT"

bench/deps.sh
echo "bench: building release binaries in $SCRATCH" >&2
$SWIFT build -c release --scratch-path "$SCRATCH" >&2
$SWIFT build -c release --package-path bench/client --scratch-path "$SCRATCH-client" >&2
TOOLS="$SCRATCH/bench-tools"
bench/tools/build.sh "$TOOLS"
BIN="$SCRATCH/release"
CLIENT="$SCRATCH-client/release/accmon-bench-client"

for suite in $SUITES; do
    echo "bench: $suite; load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
    bench/suite.sh run "$suite" "$BIN" "$TOOLS" "$CLIENT" "$PWD" \
        | /usr/bin/python3 bench/lines.py tag --revision "$REVISION" --suite "$suite" | tee -a "$OUT"
done
echo "bench: raw lines in $OUT" >&2
/usr/bin/python3 bench/summarize.py "$OUT"
