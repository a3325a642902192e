#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine (packages), builds zero2fp32-mpi (Release), and converts the
# bundled example checkpoint with 2 MPI ranks into out/example. This is the README's quick start.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" >/dev/null

flags=(--oversubscribe)
[[ $(id -u) -eq 0 ]] && flags+=(--allow-run-as-root)
rm -rf out/example
echo "+ mpiexec -n 2 zero2fp32-mpi examples/zero3-bf16-checkpoint out/example"
mpiexec -n 2 "${flags[@]}" build/release/src/zero2fp32-mpi examples/zero3-bf16-checkpoint out/example
echo
echo "+ ls -l out/example"
ls -l out/example
echo
echo "+ zero2fp32-inspect out/example/model.safetensors"
build/release/src/zero2fp32-inspect out/example/model.safetensors
