#!/usr/bin/env bash
# Builds the libFuzzer targets (the `fuzz` preset: clang, ASan + UBSan) and runs each of them
# for a fixed time on a copy of its committed seed corpus.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]     SECONDS per target, default 45; all targets if none
#
# Environment:
#   FUZZ_KEEP_CORPUS=1   continue from the corpus a previous run grew (build/fuzz/run/<target>)
#                        instead of starting again from the committed seeds
#
# The committed corpus (tests/fuzz/corpus/<target>) is never written to: each run works in
# build/fuzz/run/<target>/corpus. Prints, per target, executions, coverage and the result, and
# exits non-zero when any target found something (crash, sanitizer report, leak, timeout or
# out-of-memory), naming the input that triggered it. To make such an input a regression case,
# copy it to tests/fuzz/regressions/<target>/ and add a unit test (see tests/fuzz/README.md).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

seconds=${1:-45}
shift || true
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [[ "$seconds" -lt 1 ]]; then
    echo "usage: scripts/fuzz.sh [SECONDS] [TARGET...]" >&2
    exit 2
fi

# Target -> longest input. The fixtures' torch files are at most ~47 KB and their pickles ~2 KB,
# but pickles need room too: the printer's stack overflow took ~30 KB of nesting to show in
# the fuzz build. Longer seeds are truncated to this when loaded (the CTest replay is not).
declare -A max_len=(
    [zip_reader]=65536
    [legacy_archive]=65536
    [pickle]=65536
    [checkpoint_interpreter]=65536
    [safetensors_header]=65536
    [wire_codec]=65536
)
all_targets=(zip_reader legacy_archive pickle checkpoint_interpreter safetensors_header wire_codec)
targets=("$@")
[[ ${#targets[@]} -eq 0 ]] && targets=("${all_targets[@]}")
for target in "${targets[@]}"; do
    [[ -n "${max_len[$target]:-}" ]] || { echo "fuzz.sh: unknown target '$target'" >&2; exit 2; }
done

echo "== build: fuzz preset"
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j 2 >/dev/null

export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=1:allocator_may_return_null=0"
export LSAN_OPTIONS="suppressions=$root/tests/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"

failed=()
for target in "${targets[@]}"; do
    binary=build/fuzz/tests/fuzz/fuzz_$target
    work=build/fuzz/run/$target
    corpus=$work/corpus
    artifacts=$work/artifacts/
    log=$work/fuzz.log
    if [[ "${FUZZ_KEEP_CORPUS:-0}" != 1 ]]; then
        rm -rf "$corpus"
    fi
    mkdir -p "$corpus" "$artifacts"
    rm -f "$artifacts"* "$log"
    cp tests/fuzz/corpus/"$target"/* "$corpus"/
    if compgen -G "tests/fuzz/regressions/$target/*" >/dev/null; then
        cp tests/fuzz/regressions/"$target"/* "$corpus"/
    fi

    # A dictionary where the format has tokens worth one (the wire codec, all binary, has none).
    dict=()
    [[ -f "tests/fuzz/dict/$target.dict" ]] && dict=(-dict="tests/fuzz/dict/$target.dict")

    echo "== fuzz: $target (${seconds}s, max_len ${max_len[$target]})"
    status=0
    "$binary" "$corpus" \
        "${dict[@]}" \
        -max_total_time="$seconds" \
        -max_len="${max_len[$target]}" \
        -rss_limit_mb=2048 \
        -timeout=10 \
        -artifact_prefix="$artifacts" \
        -print_final_stats=1 >"$log" 2>&1 || status=$?

    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || true)
    speed=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' || true)
    last=$(grep -E '^#[0-9]+' "$log" | tail -n 1 || true)
    cov=$(grep -o 'cov: [0-9]*' <<<"$last" | grep -o '[0-9]*' || true)
    ft=$(grep -o 'ft: [0-9]*' <<<"$last" | grep -o '[0-9]*' || true)
    corp=$(grep -o 'corp: [0-9]*' <<<"$last" | grep -o '[0-9]*' || true)
    echo "   executions ${runs:-?} (${speed:-?}/s), coverage ${cov:-?} edges, ${ft:-?} features, corpus ${corp:-?} inputs"

    finding_files=$(ls "$artifacts" 2>/dev/null || true)
    if [[ $status -ne 0 || -n "$finding_files" ]]; then
        echo "   result: FINDING (exit status $status); log: $log"
        for file in $finding_files; do
            echo "   input: $artifacts$file"
        done
        grep -E '==z2f-fuzz==|ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error|SUMMARY' \
            "$log" | head -n 8 | sed 's/^/   | /'
        failed+=("$target")
    else
        echo "   result: clean"
    fi
done

if [[ ${#failed[@]} -gt 0 ]]; then
    echo "fuzz.sh: findings in: ${failed[*]}" >&2
    exit 1
fi
echo "fuzz.sh: all targets clean"
