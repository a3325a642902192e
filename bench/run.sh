#!/usr/bin/env bash
# The benchmark in one command: installs what is missing (fio, python3-matplotlib; see
# scripts/install-deps.sh --bench), builds the Release binaries, and runs bench/bench.py with its
# defaults: models 201m, 540m and 1.5b; warm and cold inputs (cold needs root); 1 and 2 ranks;
# both write paths (--io direct and buffered); fp32 and bf16 output; universal
# output at 1 and 2 ranks; three interleaved rounds; then the 405B W=512 metadata step. Each
# round has the device's write limit (fio and dd, direct), cp + sync, the launcher's start-up
# and, cold, fio direct reads of the needed input bytes. Any bench.py option may follow, e.g.
#
#   bench/run.sh --models 201m --repeat 1 --cache warm   # a quick look
#   bench/run.sh --repeat 5                              # the published figures
#   bench/run.sh --work /lustre/$USER/z2f-bench          # measure another file system
#   bench/run.sh --external 'python3 zero_to_fp32.py {ckpt} {out} --safe_serialization'
#
# Needs ~25 GB free under --work (default bench/work); results go to bench/results/
# (<date>-<commit>.md, .csv, -samples.csv, .png).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh --bench
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" --target zero2fp32-mpi zero2fp32-synth >/dev/null
exec /usr/bin/python3 bench/bench.py "$@"
