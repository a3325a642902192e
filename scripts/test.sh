#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine (packages), then builds and tests every configuration CI
# covers, prints which ran, and runs every libFuzzer target for a short time (30 s each). This
# is the README's test command and what CI runs.
#
#   release             GCC, Open MPI, every optional dependency: the whole test suite
#   asan-clang-minimal  clang with ASan + UBSan, without liburing, ISA-L and HDF5 (their
#                       fallbacks): the whole test suite but the 2-rank fault sweep (faults.n1
#                       sweeps every I/O call already; n2 is the suite's longest test)
#   mpich-static        GCC with Debian's MPICH, dependencies linked statically: the unit, MPI
#                       and build tests (labels unit|mpi|build) without the fault sweeps
# (CMakePresets.json's test presets hold these cuts, made to keep CI within an hour here.)
#
# Environment: Z2F_CONFIGURATIONS="release ..." to run only some of them; Z2F_FUZZ_SECONDS.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh --test

read -r -a configurations <<<"${Z2F_CONFIGURATIONS:-release asan-clang-minimal mpich-static}"
jobs=$(nproc)
mkdir -p build
status=0
summary=()
for preset in "${configurations[@]}"; do
    start=$SECONDS
    echo "== build: $preset"
    if ! cmake --preset "$preset" >"build/$preset.configure.log" 2>&1; then
        cat "build/$preset.configure.log"
        summary+=("$preset: configure FAILED")
        status=1
        continue
    fi
    # The configure summary: compiler, MPI and what stands in for a missing dependency.
    sed -n '/zero2fp32 .* configuration:/,/^-- $/p' "build/$preset.configure.log"
    rm -f "build/$preset.configure.log"
    if ! cmake --build --preset "$preset" -j "$jobs" >/dev/null; then
        summary+=("$preset: build FAILED")
        status=1
        continue
    fi
    echo "== tests: $preset"
    result=passed
    ctest --preset "$preset" -j "$jobs" || { result=FAILED; status=1; }
    summary+=("$preset: tests $result ($(((SECONDS - start) / 60)) min)")
done

echo "== fuzz"
fuzz=clean
scripts/fuzz.sh "${Z2F_FUZZ_SECONDS:-30}" || { fuzz=FAILED; status=1; }

echo "== configurations run"
for line in "${summary[@]}"; do
    echo "   $line"
done
echo "   fuzz: $fuzz"
exit $status
