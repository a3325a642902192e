#!/usr/bin/env bash
# Regenerates the committed seed corpora tests/fuzz/corpus/<target>/ from the fixtures in
# tests/data/deepspeed and the hand-made edge cases of make_seeds.py (python3, standard library
# only; a development tool, never run by the build or the tests).
#
#   tests/fuzz/make_corpus.sh
#
# Files are named by the SHA-1 of their content, as libFuzzer names the inputs it keeps, so
# identical seeds collapse into one file and a rerun on unchanged inputs changes nothing.
# The corpora the fuzzers grow while running stay out of the tree (scripts/fuzz.sh works on a
# copy under build/).
set -euo pipefail
cd "$(dirname "$0")/../.."

staging=$(mktemp -d)
trap 'rm -rf "$staging"' EXIT
python3 tests/fuzz/make_seeds.py tests/data/deepspeed "$staging"
# The wire codec's seeds are real payloads, encoded by the library itself (a Release build).
seeds_tool=${Z2F_WIRE_SEEDS:-build/release/tests/z2f_make_wire_seeds}
[[ -x "$seeds_tool" ]] || { echo "make_corpus.sh: build $seeds_tool first (cmake --build --preset release)" >&2; exit 1; }
"$seeds_tool" tests/data "$staging/wire_codec" >/dev/null

for dir in "$staging"/*/; do
    target=$(basename "$dir")
    out=tests/fuzz/corpus/$target
    rm -rf "$out"
    mkdir -p "$out"
    for seed in "$dir"*; do
        cp "$seed" "$out/$(sha1sum "$seed" | cut -c1-40)"
    done
    printf '%-24s %4d files %6d KiB\n' "$target" "$(ls "$out" | wc -l)" \
        "$(du -sk "$out" | cut -f1)"
done
