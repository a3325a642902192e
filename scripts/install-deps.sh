#!/usr/bin/env bash
# Installs the Debian 12 packages zero2fp32-mpi needs. Idempotent, and silent when everything is
# already present.
#
#   scripts/install-deps.sh            build + run dependencies
#   scripts/install-deps.sh --test     also what the test suite and CI's configurations use
#                                      (Slurm, clang for the fuzzers and the ASan build, Debian's
#                                      MPICH beside Open MPI, clang-format, torch/h5py for
#                                      cross-checks)
#
# liburing, ISA-L and HDF5 are optional for the build (cmake/Dependencies.cmake); they are
# installed here so that the default build has them all.
#   scripts/install-deps.sh --bench    also what bench/ uses (python3 + matplotlib for the plot)
set -euo pipefail

packages=(
    g++ cmake make pkg-config
    openmpi-bin libopenmpi-dev libhdf5-openmpi-dev
    libboost-program-options-dev libgtest-dev zlib1g-dev nlohmann-json3-dev
    libisal-dev                              # CRC-32 (common/crc32.cpp)
    liburing-dev                             # io_uring engine (io/uring_async_io.cpp)
    python3-dev pybind11-dev                 # the Python package's extension (src/python)
)
if [[ "${1:-}" == "--test" ]]; then
    packages+=(
        slurm-wlm munge                      # a one-node Slurm cluster for srun/sbatch tests
        clang libclang-rt-14-dev             # libFuzzer targets, the asan-clang-minimal preset
        mpich libmpich-dev                   # the mpich-static preset (Open MPI stays the default)
        clang-format                         # the formatting check
        python3-torch python3-h5py           # independent cross-checks of our outputs (optional)
        python3-pytest                       # the Python package's tests (tests/python/package)
        python3-venv python3-pip python3-setuptools python3-wheel  # its installation test
        util-linux procps psmisc             # setsid, pgrep, fuser used by the fault tests
        strace                               # slows ranks down in the launcher-signal test
    )
fi
if [[ "${1:-}" == "--bench" ]]; then
    packages+=(python3 python3-matplotlib
               fio libdeflate-dev            # bench/io_engine.sh; crc32_bench's third contender
               python3-torch python3-tqdm)   # bench/python_bench.py (DeepSpeed's script imports tqdm)
fi

missing=()
for pkg in "${packages[@]}"; do
    status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)
    [[ "$status" == "installed" ]] || missing+=("$pkg")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

sudo=""
if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null || { echo "install-deps: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
    sudo="sudo"
fi
echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq >/dev/null
# Slurm's postinst must not try to start daemons on a machine without systemd.
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
