#!/usr/bin/env bash
# `cmake --install` of this build into a fresh prefix, then (1) a separate CMake project that
# uses the installed package (find_package(zero2fp32), target zero2fp32::zero2fp32) builds and
# converts a fixture, and (2) the installed tools run from the prefix alone (PATH use).
#
# Environment: Z2F_BUILD_DIR (the build to install), Z2F_SOURCE_DIR, Z2F_CONSUMER_FLAGS (the
# build's sanitizer flags, so that the consumer links a sanitized library the same way).
set -euo pipefail

work=$(mktemp -d "${TMPDIR:-/tmp}/z2f-install.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() {
    echo "FAIL: $*"
    exit 1
}

cmake --install "$Z2F_BUILD_DIR" --prefix "$work/prefix" >"$work/install.log" \
    || fail "cmake --install: $(tail -5 "$work/install.log")"
for tool in zero2fp32-mpi zero2fp32-inspect zero2fp32-synth; do
    [[ -x "$work/prefix/bin/$tool" ]] || fail "$tool is not installed"
done
[[ -f "$work/prefix/include/zero2fp32/mpi.hpp" ]] || fail "public headers are not installed"
[[ -f "$work/prefix/include/zero2fp32/version.hpp" ]] || fail "version.hpp is not installed"
if ls "$work/prefix/include" | grep -qv '^zero2fp32$'; then
    fail "something besides include/zero2fp32 was installed: $(ls "$work/prefix/include")"
fi

example="$Z2F_SOURCE_DIR/examples/zero3-bf16-checkpoint"
echo "--- a consumer project against the installed package"
cmake -S "$Z2F_SOURCE_DIR/tests/install/consumer" -B "$work/consumer" \
    -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CXX_FLAGS="${Z2F_CONSUMER_FLAGS:-}" -DCMAKE_EXE_LINKER_FLAGS="${Z2F_CONSUMER_FLAGS:-}" \
    >"$work/configure.log" 2>&1 || fail "consumer configure: $(tail -20 "$work/configure.log")"
cmake --build "$work/consumer" >"$work/build.log" 2>&1 || fail "consumer build: $(tail -20 "$work/build.log")"
"$work/consumer/consumer" "$example" "$work/consumer_out" >"$work/consumer.txt" 2>&1 \
    || fail "consumer run: $(cat "$work/consumer.txt")"
grep -q '^planned model.safetensors ' "$work/consumer.txt" || fail "no planned file: $(cat "$work/consumer.txt")"
grep -q '(bfloat16)' "$work/consumer.txt" || fail "the plan's dtype: $(cat "$work/consumer.txt")"
grep -q '^ok$' "$work/consumer.txt" || fail "consumer: $(cat "$work/consumer.txt")"

echo "--- the installed zero2fp32-mpi from PATH"
PATH="$work/prefix/bin:$PATH" zero2fp32-mpi "$example" "$work/cli_out" -q \
    || fail "the installed zero2fp32-mpi failed"
cmp -s "$work/cli_out/model.safetensors" "$work/consumer_out/model.safetensors" && \
    fail "fp32 and bf16 outputs should differ"
PATH="$work/prefix/bin:$PATH" zero2fp32-mpi "$example" "$work/cli_bf16" -q --dtype bf16 \
    || fail "the installed zero2fp32-mpi failed (bf16)"
cmp -s "$work/cli_bf16/model.safetensors" "$work/consumer_out/model.safetensors" \
    || fail "the installed tool and the library consumer wrote different bytes"
if [[ "${Z2F_WITH_HDF5:-1}" == 1 ]]; then
    PATH="$work/prefix/bin:$PATH" zero2fp32-mpi "$example" "$work/cli_h5" -q --format hdf5 \
        || fail "the installed zero2fp32-mpi failed (hdf5: its module is loaded from the library's directory)"
    [[ -s "$work/cli_h5/model.h5" ]] || fail "no model.h5 from the installed tool"
else
    # Built without HDF5: the installed tool refuses the format and names the option that adds it.
    status=0
    PATH="$work/prefix/bin:$PATH" zero2fp32-mpi "$example" "$work/cli_h5" -q --format hdf5 \
        >"$work/h5.txt" 2>&1 || status=$?
    [[ $status == 2 ]] || fail "--format hdf5 without HDF5 exited $status, expected 2: $(cat "$work/h5.txt")"
    grep -q -- "-DZ2F_WITH_HDF5=ON" "$work/h5.txt" || fail "the refusal does not name the option: $(cat "$work/h5.txt")"
    [[ ! -e "$work/cli_h5" ]] || fail "a refused format left an output folder"
fi
echo "installed package, consumer and tools: ok"
