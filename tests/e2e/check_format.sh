#!/usr/bin/env bash
# Every C++ source of the project follows .clang-format (skipped when clang-format is absent).
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
command -v clang-format >/dev/null || { echo "SKIP: clang-format not installed"; exit 77; }
cd "$root"
bad=$(find src include tests -name '*.cpp' -o -name '*.hpp' | sort | while read -r f; do
    clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || echo "$f"
done)
if [[ -n "$bad" ]]; then
    echo "not clang-formatted (run clang-format -i on them):"
    echo "$bad"
    exit 1
fi
echo "all sources clang-formatted"
