#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine (packages), builds the Release and the ASan+UBSan builds,
# runs the whole test suite on both, then runs every libFuzzer target for a short time (30 s
# each, ASan + UBSan). This is the README's test command and what CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh --test

jobs=$(nproc)
for preset in release asan; do
    echo "== build: $preset"
    cmake --preset "$preset" >/dev/null
    cmake --build --preset "$preset" -j "$jobs" >/dev/null
done

status=0
for preset in release asan; do
    echo "== tests: $preset"
    ctest --preset "$preset" -j "$jobs" || status=1
done

echo "== fuzz"
scripts/fuzz.sh "${Z2F_FUZZ_SECONDS:-30}" || status=1
exit $status
