#!/usr/bin/env bash
# compare_trees.sh REFERENCE OTHER...: every OTHER tree holds exactly REFERENCE's files, byte for
# byte. Used to prove that outputs do not depend on the number of MPI ranks.
set -euo pipefail
reference=$1
shift
[[ -d "$reference" ]] || { echo "missing $reference (did the MPI tests run?)"; exit 1; }
count=$(find "$reference" -type f | wc -l)
[[ $count -gt 0 ]] || { echo "no files under $reference"; exit 1; }
for other in "$@"; do
    # The run record (.zero2fp32-run.json) names the input paths, which differ between runs.
    if ! diff -r -q -x .zero2fp32-run.json "$reference" "$other"; then
        echo "FAIL: $other differs from $reference"
        exit 1
    fi
    echo "identical: $other ($count files)"
done
