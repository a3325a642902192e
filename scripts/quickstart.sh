#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine (packages), builds the three tools (Release, without the test
# suite: scripts/test.sh builds and runs that), and converts the bundled example checkpoint with
# 2 MPI ranks into out/example. This is the README's quick start. The build shows its progress
# and the script ends with where the binary is and what to run next.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
build=build/tools
echo "+ cmake --preset tools    # Release, the tools only: no test suite, no GoogleTest"
cmake --preset tools | sed -n '/zero2fp32 .* configuration:/,/^-- $/p'
echo "+ cmake --build $build --target zero2fp32-mpi zero2fp32-inspect zero2fp32-synth -j $(nproc)"
cmake --build "$build" --target zero2fp32-mpi zero2fp32-inspect zero2fp32-synth -j "$(nproc)"
bin=$(cd "$build/src" && pwd -P)

flags=(--oversubscribe)
[[ $(id -u) -eq 0 ]] && flags+=(--allow-run-as-root)
rm -rf out/example
echo
echo "+ mpiexec -n 2 zero2fp32-mpi examples/zero3-bf16-checkpoint out/example"
mpiexec -n 2 "${flags[@]}" "$bin/zero2fp32-mpi" examples/zero3-bf16-checkpoint out/example
echo
echo "+ ls -l out/example"
ls -l out/example
echo
echo "+ zero2fp32-inspect out/example/model.safetensors"
"$bin/zero2fp32-inspect" out/example/model.safetensors
cat <<EOT

The tools are in $bin:
  zero2fp32-mpi  zero2fp32-inspect  zero2fp32-synth
Next, check the conversion against the checkpoint (it only reads), then convert your own:
  $bin/zero2fp32-mpi examples/zero3-bf16-checkpoint out/example --verify
  mpiexec -n 8 $bin/zero2fp32-mpi /path/to/checkpoint /path/to/output
To install them (bin/, lib/, include/, a CMake package): cmake --install $build --prefix /opt/zero2fp32
EOT
