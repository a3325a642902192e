#!/usr/bin/env bash
# Z2F_STATIC_DEPS: each tool depends directly on nothing but the MPI library and the C library
# (its ELF NEEDED entries), so a compute node needs only those; then the tool runs and converts
# the bundled example under the build's mpiexec.
#
# Environment (from CTest): Z2F_TOOLS ('|'-separated paths), Z2F_MPI_LIBRARIES (the build's
# MPI_C_LIBRARIES), Z2F_MPIEXEC, Z2F_MPIEXEC_FLAGS, Z2F_SOURCE_DIR.
set -uo pipefail

work=$(mktemp -d "${TMPDIR:-/tmp}/z2f-static.XXXXXX")
trap 'rm -rf "$work"' EXIT
failures=0
fail() {
    echo "FAIL: $*"
    failures=$((failures + 1))
}
needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }

# The C library's parts (glibc), and the sonames of the MPI libraries the build links.
allowed=(libc.so.6 libm.so.6 libpthread.so.0 libdl.so.2 librt.so.1 ld-linux-x86-64.so.2)
IFS='|' read -r -a mpi_libraries <<<"$Z2F_MPI_LIBRARIES"
for library in "${mpi_libraries[@]}"; do
    soname=$(readelf -d "$library" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
    [[ -n "$soname" ]] && allowed+=("$soname")
done

IFS='|' read -r -a tools <<<"$Z2F_TOOLS"
for tool in "${tools[@]}"; do
    for library in $(needed "$tool"); do
        [[ " ${allowed[*]} " == *" $library "* ]] \
            || fail "$(basename "$tool") needs $library (allowed: ${allowed[*]})"
    done
done

bin=${tools[0]}
"$bin" --version >"$work/version.txt" 2>&1 || fail "--version: $(cat "$work/version.txt")"
# shellcheck disable=SC2086
"$Z2F_MPIEXEC" -n 2 $Z2F_MPIEXEC_FLAGS "$bin" "$Z2F_SOURCE_DIR/examples/zero3-bf16-checkpoint" \
    "$work/out" -q >"$work/run.txt" 2>&1 || fail "conversion: $(cat "$work/run.txt")"
[[ -s "$work/out/model.safetensors" ]] || fail "no model.safetensors"
if [[ $failures -gt 0 ]]; then
    exit 1
fi
echo "static tools: only MPI and libc needed; conversion ok"
