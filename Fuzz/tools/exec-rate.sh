#!/usr/bin/env bash
# Executions per CPU-second of a fuzz target: a fixed-seed run of RUNS executions from a copy of CORPUS (which it
# first replays), timed by the CPU it used, so that a busy machine does not skew the figure (exec/s per wall-clock
# second, as libFuzzer prints it, falls with every other process on the machine).
#
#   Fuzz/tools/exec-rate.sh BINARY CORPUS [RUNS] [LIBFUZZER FLAGS...]   (RUNS default 30000)
#
# Prints one line: binary, runs, CPU seconds, wall seconds, executions per CPU-second.
set -euo pipefail
binary=$1 corpus=$2 runs=${3:-30000}
shift $(($# < 3 ? $# : 3))
copy=$(mktemp -d)
trap 'rm -rf "$copy"' EXIT
cp -r "$corpus"/. "$copy"/
start=$(date +%s.%N)
before=$(awk '{print $14 + $15 + $16 + $17}' /proc/$$/stat)  # this shell's own and its waited-for children's ticks
ASAN_OPTIONS=${ASAN_OPTIONS-malloc_context_size=0} SWIFT_BACKTRACE=enable=no \
    "$binary" -seed=1 -runs="$runs" -max_len=4096 -rss_limit_mb=4096 "$@" "$copy" >"$copy.log" 2>&1 || {
    tail -20 "$copy.log" >&2
    exit 1
}
after=$(awk '{print $14 + $15 + $16 + $17}' /proc/$$/stat)
wall=$(echo "$(date +%s.%N) - $start" | bc)
cpu=$(echo "scale=2; ($after - $before) / $(getconf CLK_TCK)" | bc)
rm -f "$copy.log"
echo "$(basename "$binary") runs=$runs cpu_s=$cpu wall_s=$(printf %.2f "$wall") exec_per_cpu_s=$(echo "$runs / $cpu" | bc)"
