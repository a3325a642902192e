#!/usr/bin/env bash
# A tools-only build (-DZ2F_BUILD_TESTS=OFF, the `tools` preset) needs no GoogleTest: this
# configures the source tree with GoogleTest made unfindable (CMAKE_DISABLE_FIND_PACKAGE_GTest)
# and the same compilers and MPI as this build, then checks that the configuration succeeds,
# that its summary says so, that the three tools are targets, and that no generated build rule
# mentions gtest.
#
# Environment (from CTest): Z2F_SOURCE_DIR, Z2F_CMAKE, Z2F_CONFIGURE_ARGS ('|'-separated -D
# arguments repeating this build's compilers, MPI and optional dependencies).
set -uo pipefail

work=$(mktemp -d "${TMPDIR:-/tmp}/z2f-tools-only.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() {
    echo "FAIL: $*"
    exit 1
}

IFS='|' read -r -a args <<<"$Z2F_CONFIGURE_ARGS"
"$Z2F_CMAKE" -S "$Z2F_SOURCE_DIR" -B "$work/build" -DCMAKE_BUILD_TYPE=Release \
    -DZ2F_BUILD_TESTS=OFF -DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON "${args[@]}" >"$work/configure.log" 2>&1 \
    || fail "a tools-only configuration failed without GoogleTest: $(tail -20 "$work/configure.log")"
grep -q "tests  *no (Z2F_BUILD_TESTS=OFF: GoogleTest not needed)" "$work/configure.log" \
    || fail "the configure summary does not say the tests are off: $(tail -15 "$work/configure.log")"
"$Z2F_CMAKE" --build "$work/build" --target help >"$work/targets.txt" 2>&1 || fail "no target list"
for tool in zero2fp32-mpi zero2fp32-inspect zero2fp32-synth; do
    grep -q "\.\.\. $tool\$" "$work/targets.txt" || fail "$tool is not a target: $(cat "$work/targets.txt")"
done
grep -q "unit_tests\|mpi_tests" "$work/targets.txt" && fail "test targets in a tools-only build"
found=$(grep -ril "gtest" "$work/build" --include=Makefile --include='*.make' --include='*.cmake' | head -3)
[[ -z "$found" ]] || fail "generated files mention gtest: $found"
echo "tools-only configuration without GoogleTest: ok"
