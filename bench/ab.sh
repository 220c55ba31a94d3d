#!/bin/bash
# Side by side: two revisions' release builds measured alternately by the same bench scripts (this checkout's), so
# that the machine's drifting load favours neither. See bench/README.md, "Side by side".
#
#   bench/ab.sh REV_A REV_B [ROUNDS]        (make bench-ab A=REV_A B=REV_B ROUNDS=N)
#
# Each revision is checked out in a git worktree under $BENCH_AB_DIR (default /tmp/accmon-ab) and built there in
# release (its own bench client too, built against its own AccmonClient); builds are kept for the next run. Then, for
# each of ROUNDS rounds (default 3, at least 3), each suite runs once per build, A first in odd rounds and B first in
# even ones (A B, B A, A B, ...). Only the suites both builds support run (bench/suite.sh supports: an older
# revision may lack a binary, a flag or the Python client). Every JSON line is tagged with its build (A or B), its
# revision, the round, the suite and the load average (bench/lines.py tag) and written to the output file; at the end
# bench/lines.py compare prints the medians over rounds of each build's figures and B ÷ A.
#
#   BENCH_AB_SUITES  suites to run (default: stream fanout memory)
#   BENCH_AB_OUT     the lines' file (default build/bench/<date>-<A>-<B>-ab.jsonl); their summary (bench/summarize.py)
#                    goes to bench/results/<the same name>.json
#   BENCH_REPEATS, BENCH_FANOUT_COUNTS, ...: as for make bench (bench/suite.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] && [ $# -le 3 ] || { echo "usage: bench/ab.sh REV_A REV_B [ROUNDS]" >&2; exit 64; }
ROUNDS=${3:-3}
[ "$ROUNDS" -ge 3 ] 2>/dev/null || { echo "bench/ab.sh: ROUNDS must be a number, at least 3" >&2; exit 64; }
SWIFT=${SWIFT:-swift}
DIR=${BENCH_AB_DIR:-/tmp/accmon-ab}
SUITES=${BENCH_AB_SUITES:-stream fanout memory}
A=$(git rev-parse --verify "$1^{commit}")
B=$(git rev-parse --verify "$2^{commit}")
OUT=${BENCH_AB_OUT:-build/bench/$(date -u +%Y-%m-%d)-${A:0:7}-${B:0:7}-ab.jsonl}
mkdir -p "$DIR" "$(dirname "$OUT")"

bench/deps.sh
TOOLS="$DIR/tools"
bench/tools/build.sh "$TOOLS"

# build REV: a worktree of REV and its release binaries and bench client (kept: a second run builds nothing).
build() {
    local rev=$1 tree="$DIR/src-${1:0:12}" scratch="$DIR/build-${1:0:12}"
    if [ ! -e "$tree/.git" ]; then
        git worktree add --detach "$tree" "$rev" >&2
    fi
    [ "$(git -C "$tree" rev-parse HEAD)" = "$rev" ] || { echo "bench/ab.sh: $tree is not at $rev" >&2; exit 1; }
    echo "bench/ab.sh: building ${rev:0:12} in $scratch" >&2
    $SWIFT build -c release --package-path "$tree" --scratch-path "$scratch" >&2
    $SWIFT build -c release --package-path "$tree/bench/client" --scratch-path "$scratch-client" >&2
}
build "$A"
[ "$B" = "$A" ] || build "$B"
bin() { echo "$DIR/build-${1:0:12}/release"; }
client() { echo "$DIR/build-${1:0:12}-client/release/accmon-bench-client"; }
tree() { echo "$DIR/src-${1:0:12}"; }

chosen=""
for suite in $SUITES; do
    if bench/suite.sh supports "$suite" "$(bin "$A")" "$(tree "$A")" \
        && bench/suite.sh supports "$suite" "$(bin "$B")" "$(tree "$B")"; then
        chosen="$chosen $suite"
    else
        echo "bench/ab.sh: skipping $suite: not supported by both builds" >&2
    fi
done
[ -n "$chosen" ] || { echo "bench/ab.sh: no suite that both builds support" >&2; exit 1; }

echo "bench/ab.sh: A = ${A:0:12}, B = ${B:0:12}; suites:$chosen; $ROUNDS rounds; lines to $OUT" >&2
: > "$OUT"
for round in $(seq 1 "$ROUNDS"); do
    if [ $((round % 2)) = 1 ]; then order="A B"; else order="B A"; fi
    for suite in $chosen; do
        for build in $order; do
            if [ "$build" = A ]; then rev=$A; else rev=$B; fi
            echo "bench/ab.sh: round $round, $suite, $build (${rev:0:12}); load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
            bench/suite.sh run "$suite" "$(bin "$rev")" "$TOOLS" "$(client "$rev")" "$(tree "$rev")" \
                | /usr/bin/python3 bench/lines.py tag --revision "$rev" --build "$build" --round "$round" \
                    --suite "$suite" >> "$OUT"
        done
    done
done
/usr/bin/python3 bench/lines.py compare "$OUT"
echo "bench/ab.sh: lines in $OUT (bench/lines.py compare --all $OUT for every figure)" >&2
/usr/bin/python3 bench/summarize.py "$OUT"
