#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine (packages), builds the Release and the ASan+UBSan builds, and
# runs the whole test suite on both. This is the README's test command and what CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh --test

jobs=$(nproc)
for preset in release asan; do
    echo "== build: $preset"
    cmake --preset "$preset" >/dev/null
    cmake --build --preset "$preset" -j "$jobs" 2>&1 | grep -E "error|warning|Error" || true
    cmake --build --preset "$preset" -j "$jobs" >/dev/null  # fails the script on a build error
done

for preset in release asan; do
    echo "== tests: $preset"
    ctest --preset "$preset" -j "$jobs"
done
