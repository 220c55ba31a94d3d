#!/usr/bin/env bash
# Builds accmon's libFuzzer targets, runs each for a while from its committed corpus, and merges what it found back
# into that corpus; exits non-zero when a target crashes or fails to build. Fuzz/README.md says what each target
# checks and gives the latest totals.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]   (default 60 s for each target; `make fuzz` passes $FUZZ_SECONDS)
#
# 0 seconds runs each committed input (corpus and seeds) once and stops: after a run without AddressSanitizer, that
# checks what it found with it.
#
# Environment: FUZZ_BUILD_DIR (SwiftPM scratch path, default .build/fuzz), FUZZ_SANITIZERS (default fuzzer,address;
# `fuzzer` alone builds without AddressSanitizer: three to four times faster, but an out-of-bounds read through an
# unsafe pointer then goes unseen), FUZZ_MERGE=0 (leave Fuzz/corpus untouched), FUZZ_ARGS (more libFuzzer flags).
#
# How a target is built, and why so. Each target is one file, Fuzz/<Name>Fuzzer.swift, that imports the package's
# modules as a client of them does. SwiftPM builds those modules (and only them: `--target` for each module a harness
# imports, which builds what it depends on) from Package.swift as they are, in release mode, with the coverage
# instrumentation libFuzzer needs and AddressSanitizer, and with `-enable-testing`. The harness is then compiled and
# linked by swiftc against the modules' interfaces (`<bin>/Modules`) and their object files
# (`<bin>/<Module>.build/<source>.o`, for the sources `swift package describe` lists for the module and everything it
# depends on). So the real module boundaries hold: a plain `import` sees what a client sees, and `@testable import`
# (as in the package's tests) reaches `package` and `internal` declarations too; and the package's own settings
# (language mode, upcoming features, C shims and their module maps) are SwiftPM's, not copied here. The targets are
# not products in Package.swift: every `swift build` would build them, and link them against libFuzzer's `main`.
#
# Corpora. Fuzz/corpus/<target>/ is committed: each run starts from it (and from the seeds: Fuzz/seeds/<target>/ and,
# for the manifest parser, the test suite's Tests/AccmonManifestTests/Corpus/) and writes new finds to a scratch
# directory; afterwards `-set_cover_merge=1` keeps, of the old corpus and the new finds, a small set that has every
# coverage feature they have beyond the seeds' (`-merge=1` kept two thirds more files for the same features), and
# that set replaces Fuzz/corpus/<target>/ (commit it: runs add up). A crashing input is saved in Fuzz/crash-<target>/
# (not committed); replay it with `<bin> Fuzz/crash-<target>/crash-…`. Each target's log is in Fuzz/bin/<target>.log.
set -euo pipefail

# All in one function, which bash reads whole before running it: the script can be edited while a long run goes on.
main() {

duration=${1:-60}
[[ $duration =~ ^[0-9]+$ ]] || { echo "fuzz.sh: duration: '$duration' is not a number of seconds" >&2; exit 2; }
shift || true

cd "$(dirname "$0")/.."

# The targets, one a line: name | harness | seed directories (space-separated) | longest input (-max_len).
all_targets=(
    "protocol-decoder|Fuzz/ProtocolDecoderFuzzer.swift|Fuzz/seeds/protocol-decoder|4096"
    "udev-monitor-message|Fuzz/UdevMonitorMessageFuzzer.swift|Fuzz/seeds/udev-monitor-message|8192"
    "manifest-parser|Fuzz/ManifestParserFuzzer.swift|Fuzz/seeds/manifest-parser Tests/AccmonManifestTests/Corpus|4096"
    "node-request|Fuzz/NodeRequestFuzzer.swift|Fuzz/seeds/node-request|4096"
)
targets=()
if (($#)); then
    for wanted in "$@"; do
        found=
        for target in "${all_targets[@]}"; do [[ ${target%%|*} == "$wanted" ]] && targets+=("$target") && found=1; done
        [[ -n $found ]] || { echo "fuzz.sh: $wanted: no such target (${all_targets[*]%%|*})" >&2; exit 2; }
    done
else
    targets=("${all_targets[@]}")
fi

swift=${SWIFT:-$(command -v swift || echo /opt/swift/usr/bin/swift)}
[[ -x $swift ]] || { echo "fuzz.sh: swift: not found (set SWIFT or put the Swift toolchain on PATH)" >&2; exit 2; }
swiftc=$(dirname "$swift")/swiftc
sanitizers=${FUZZ_SANITIZERS:-fuzzer,address}
[[ ,$sanitizers, == *,fuzzer,* ]] || { echo "fuzz.sh: FUZZ_SANITIZERS must include fuzzer" >&2; exit 2; }
scratch=${FUZZ_BUILD_DIR:-.build/fuzz}/${sanitizers//,/-}
# One -sanitize= flag with the whole list: SwiftPM's `--sanitize fuzzer --sanitize address` gives swiftc two, of which
# it keeps the last (the modules then had no coverage instrumentation, and libFuzzer fuzzed blind).
clang_sanitizers=${sanitizers/fuzzer/fuzzer-no-link}
spm_flags=(-c release --scratch-path "$scratch" -Xswiftc -enable-testing -Xswiftc "-sanitize=$sanitizers"
    -Xcc "-fsanitize=$clang_sanitizers")
linker=()
[[ -x $(dirname "$swift")/ld.lld ]] && linker=(-use-ld=lld)  # quieter than gold with the sanitizers

description=$(mktemp)
trap 'rm -f "$description"' EXIT
"$swift" package describe --type json >"$description"

# The package modules a harness imports, one a line.
imported_modules() {
    sed -n -E 's/^[[:space:]]*(@testable[[:space:]]+)?import[[:space:]]+([A-Za-z_][A-Za-z0-9_]*).*/\2/p' "$1" |
        sort -u | python3 -c '
import json, sys
names = {target["name"] for target in json.load(open(sys.argv[1]))["targets"]}
print("\n".join(line.strip() for line in sys.stdin if line.strip() in names))' "$description"
}

# What building against the modules named on stdin takes, for them and everything they depend on, one item a line:
# `object PATH` for each Swift or C source's object file, `flag ARGUMENT` for the module map and include path of a C or
# system module (Swift needs them to load a module that imports it).
link_inputs() {
    python3 -c '
import json, os, sys
description, bin_dir = json.load(open(sys.argv[1])), sys.argv[2]
targets = {target["name"]: target for target in description["targets"]}
seen, stack = [], [line.strip() for line in sys.stdin if line.strip()]
while stack:
    name = stack.pop()
    if name not in seen:
        seen.append(name)
        stack.extend(targets[name].get("target_dependencies", []))
for name in sorted(seen):
    target = targets[name]
    build = os.path.join(bin_dir, name + ".build")
    for source in target.get("sources", []):
        print("object", os.path.join(build, os.path.basename(source) + ".o"))
    if target["module_type"] == "ClangTarget":
        print("flag -Xcc\nflag -fmodule-map-file=" + os.path.join(build, "module.modulemap"))
        print("flag -Xcc\nflag -I" + os.path.join(description["path"], target["path"], "include"))
    elif target["module_type"] == "SystemLibraryTarget":
        module_map = os.path.join(description["path"], target["path"], "module.modulemap")
        print("flag -Xcc\nflag -fmodule-map-file=" + module_map)
' "$description" "$1"
}

mkdir -p Fuzz/bin
failed=()
for target in "${targets[@]}"; do
    IFS='|' read -r name harness seeds max_len <<<"$target"
    binary=Fuzz/bin/$name-fuzzer
    log=Fuzz/bin/$name.log

    echo "== $name: building $binary ($sanitizers)"
    modules=$(imported_modules "$harness")
    built=1
    for module in $modules; do
        "$swift" build "${spm_flags[@]}" --target "$module" >"Fuzz/bin/$name.build.log" 2>&1 || { built=; break; }
    done
    if [[ -n $built ]]; then
        bin_dir=$("$swift" build "${spm_flags[@]}" --show-bin-path)
        mapfile -t inputs < <(link_inputs "$bin_dir" <<<"$modules")
        objects=() module_flags=()
        for input in "${inputs[@]}"; do
            case $input in object\ *) objects+=("${input#object }") ;; *) module_flags+=("${input#flag }") ;; esac
        done
        # The harness itself without coverage: its checks are not what is fuzzed (their branches would count as new
        # behaviour of an input, and tracing every comparison they make cost as much as the decoding).
        harness_flags=()
        [[ ,$sanitizers, == *,address,* ]] && harness_flags=(-sanitize=address)
        { "$swiftc" -c "${harness_flags[@]}" -parse-as-library -O -module-name "Fuzz_${name//-/_}" \
            -I "$bin_dir/Modules" "${module_flags[@]}" "$harness" -o "Fuzz/bin/$name.o" &&
            "$swiftc" -sanitize="$sanitizers" "${linker[@]}" "${objects[@]}" "Fuzz/bin/$name.o" -o "$binary"; } \
            >>"Fuzz/bin/$name.build.log" 2>&1 || built=
    fi
    if [[ -z $built ]]; then
        grep -E -m 20 'error:' "Fuzz/bin/$name.build.log" >&2 || tail -20 "Fuzz/bin/$name.build.log" >&2
        echo "== $name: FAILED to build (Fuzz/bin/$name.build.log)" >&2
        failed+=("$name (build)")
        continue
    fi

    corpus=Fuzz/corpus/$name
    work=$scratch/runs/$name
    rm -rf "$work"
    mkdir -p "$corpus" "$work/new" "Fuzz/crash-$name"
    seed_dirs=()
    for dir in $seeds; do [[ -d $dir ]] && seed_dirs+=("$dir"); done
    options=(-max_len="$max_len" -timeout=10 -rss_limit_mb=4096)
    [[ -f Fuzz/$name.dict ]] && options+=(-dict="Fuzz/$name.dict")

    if ((duration == 0)); then
        length=(-runs=0)
        echo "== $name: running the $(find "$corpus" -type f | wc -l) inputs of $corpus and those of ${seed_dirs[*]}"
    else
        length=(-max_total_time="$duration")
        echo "== $name: fuzzing for ${duration}s from $corpus ($(find "$corpus" -type f | wc -l) inputs)" \
            "and ${seed_dirs[*]}"
    fi
    status=0
    start=$(date +%s)
    # Swift's crash backtracer reads memory that ASan flags; libFuzzer and ASan print the useful report. ASan records
    # no stack for each allocation (malloc_context_size=0: a fifth of the time of an execution); a report then says
    # where the bad access was, and replaying the input with ASAN_OPTIONS= adds where the memory was allocated.
    # shellcheck disable=SC2086 # FUZZ_ARGS is a list of flags
    ASAN_OPTIONS=${ASAN_OPTIONS-malloc_context_size=0} SWIFT_BACKTRACE=${SWIFT_BACKTRACE:-enable=no} \
        "$binary" "${options[@]}" "${length[@]}" ${FUZZ_ARGS:-} -print_final_stats=1 \
        -artifact_prefix="Fuzz/crash-$name/" \
        "$work/new" "$corpus" "${seed_dirs[@]}" >"$log" 2>&1 || status=$?
    elapsed=$(($(date +%s) - start))
    executions=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)

    if [[ ${FUZZ_MERGE:-1} != 0 ]] && ((duration > 0)); then
        # Merge into a directory that already holds the seeds, so that only what covers more than they do is kept;
        # then drop the seeds again: they are committed where they are.
        merged=$work/merged
        mkdir -p "$merged"
        for dir in "${seed_dirs[@]}"; do
            for file in "$dir"/*; do
                [[ -f $file ]] && cp "$file" "$merged/seed-$(basename "$dir")-$(basename "$file")"
            done
        done
        if SWIFT_BACKTRACE=enable=no "$binary" "${options[@]}" -set_cover_merge=1 "$merged" "$corpus" "$work/new" \
            >"$work/merge.log" 2>&1; then
            rm -f "$merged"/seed-*
            find "$corpus" -type f -delete
            cp "$merged"/* "$corpus"/ 2>/dev/null || true
        else
            echo "== $name: merge failed, corpus left as it was ($work/merge.log)" >&2
        fi
    fi
    echo "== $name: exit $status, ${executions:-?} executions in ${elapsed}s," \
        "$(find "$corpus" -type f | wc -l) inputs ($(du -sk --apparent-size "$corpus" | cut -f1) KiB) in $corpus"
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
}

main "$@"
