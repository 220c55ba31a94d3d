#!/usr/bin/env bash
# Builds accmon's libFuzzer targets and runs each for a while; exits non-zero when a target crashes (or fails to
# build). Usage: scripts/fuzz.sh [SECONDS]   (default 60, for each target; `make fuzz` passes $FUZZ_SECONDS)
#
# Each target is one Swift file under Fuzz/ compiled together with the AccmonCore sources into one module, so no
# package build is involved. Its corpus, Fuzz/corpus-<seeds>/ (not committed), starts from the committed
# Fuzz/seeds/<seeds>/ and grows across runs; Fuzz/<seeds>.dict, when present, is passed as a dictionary. A crashing
# input is saved in Fuzz/crash-<name>/ (not committed): replay it with `Fuzz/bin/<name>-fuzzer Fuzz/crash-<name>/crash-…`.
set -euo pipefail

duration=${1:-60}
[[ $duration =~ ^[0-9]+$ ]] || { echo "fuzz.sh: duration: '$duration' is not a number of seconds" >&2; exit 2; }

cd "$(dirname "$0")/.."

# The fuzz targets, one a line: name | seed directory under Fuzz/seeds | the target's source file.
targets=(
    "protocol-decoder|protocol|Fuzz/ProtocolDecoderFuzzer.swift"
    "manifest-parser|manifest|Fuzz/ManifestParserFuzzer.swift"
)

swiftc=${SWIFTC:-$(command -v swiftc || echo /opt/swift/usr/bin/swiftc)}
[[ -x $swiftc ]] || { echo "fuzz.sh: swiftc: not found (set SWIFTC or put the Swift toolchain on PATH)" >&2; exit 2; }
linker=()
[[ -x $(dirname "$swiftc")/ld.lld ]] && linker=(-use-ld=lld)  # quieter than gold with the sanitizers

mkdir -p Fuzz/bin
failed=()
for target in "${targets[@]}"; do
    IFS='|' read -r name seeds source <<<"$target"
    binary=Fuzz/bin/$name-fuzzer
    corpus=Fuzz/corpus-$seeds
    log=Fuzz/bin/$name.log

    echo "== $name: building $binary"
    if ! "$swiftc" -sanitize=fuzzer,address -parse-as-library -O -module-name "Fuzz_${name//-/_}" "${linker[@]}" \
        Sources/AccmonCore/*.swift "$source" -o "$binary"; then
        echo "== $name: FAILED to build" >&2
        failed+=("$name (build)")
        continue
    fi

    mkdir -p "$corpus"
    [[ -d Fuzz/seeds/$seeds ]] && cp -n Fuzz/seeds/"$seeds"/* "$corpus"/ 2>/dev/null || true
    dictionary=()
    [[ -f Fuzz/$seeds.dict ]] && dictionary=(-dict="Fuzz/$seeds.dict")

    mkdir -p "Fuzz/crash-$name"

    echo "== $name: fuzzing for ${duration}s (corpus $corpus, log $log)"
    status=0
    # Swift's crash backtracer reads memory that ASan flags; libFuzzer and ASan print the useful report.
    SWIFT_BACKTRACE=${SWIFT_BACKTRACE:-enable=no} \
        "$binary" "${dictionary[@]}" -max_total_time="$duration" -max_len=4096 -timeout=10 -rss_limit_mb=4096 \
        -print_final_stats=1 -artifact_prefix="Fuzz/crash-$name/" "$corpus" >"$log" 2>&1 || status=$?

    executions=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    echo "== $name: exit $status, ${executions:-?} executions, $(find "$corpus" -type f | wc -l) inputs in the corpus"
    if ((status != 0)); then
        grep -E -m 20 'ERROR|Fatal error|invariant violated|SUMMARY|Test unit written' "$log" >&2 || tail -40 "$log" >&2
        failed+=("$name (exit $status)")
    fi
done

if ((${#failed[@]})); then
    echo "fuzz.sh: FAILED: ${failed[*]}" >&2
    exit 1
fi
echo "fuzz.sh: no crash in ${#targets[@]} target(s)"
