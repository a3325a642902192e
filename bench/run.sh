#!/usr/bin/env bash
# The README's performance table in one command: installs what is missing (python3-matplotlib
# for the plot), builds the Release binaries, and runs bench/bench.py with its defaults
# (models 201m, 540m and 1.5b; 1 and 2 ranks; every I/O backend; fp32 and bf16 output; three
# interleaved rounds; then the 405B W=512 metadata step). Any bench.py option may follow, e.g.
#
#   bench/run.sh --models 201m --repeat 1        # a quick look
#   bench/run.sh --work /lustre/$USER/z2f-bench  # measure another file system
#   bench/run.sh --external 'python3 zero_to_fp32.py {ckpt} {out} --safe_serialization'
#
# Needs ~25 GB free under --work (default bench/work); results go to bench/results/.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh --bench
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" >/dev/null
exec /usr/bin/python3 bench/bench.py "$@"
