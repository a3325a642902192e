# Shared helpers for the end-to-end shell tests. Sourced; expects from CTest:
#   Z2F_BIN        path of zero2fp32-mpi
#   Z2F_FIXTURES   tests/data/deepspeed
#   Z2F_MPIEXEC    mpiexec, and Z2F_MPIEXEC_FLAGS its flags (--oversubscribe, --allow-run-as-root)
set -uo pipefail

WORK=$(mktemp -d "${TMPDIR:-/tmp}/z2f-e2e-XXXXXX")
chmod 755 "$WORK"
trap 'rm -rf "$WORK"' EXIT
FAILURES=0
CASE=""

case_start() {
    CASE=$1
    echo "--- $CASE"
}

fail() {
    echo "FAIL [$CASE]: $*"
    FAILURES=$((FAILURES + 1))
}

finish() {
    if [[ $FAILURES -gt 0 ]]; then
        echo "$FAILURES failure(s)"
        exit 1
    fi
    echo "all cases passed"
    exit 0
}

# run_mpi N ARGS...: zero2fp32-mpi under mpiexec with N ranks; stdout/stderr in $WORK/out.txt,
# $WORK/err.txt; the exit code in $RC.
run_mpi() {
    local ranks=$1
    shift
    # shellcheck disable=SC2086
    "$Z2F_MPIEXEC" -n "$ranks" $Z2F_MPIEXEC_FLAGS "$Z2F_BIN" "$@" </dev/null >"$WORK/out.txt" 2>"$WORK/err.txt"
    RC=$?
}

# run_single ARGS...: no launcher (the one rank, without MPI).
run_single() {
    "$Z2F_BIN" "$@" >"$WORK/out.txt" 2>"$WORK/err.txt"
    RC=$?
}

expect_rc() {
    local want=$1
    if [[ $RC -ne $want ]]; then
        fail "exit code $RC, expected $want; stderr:"
        sed 's/^/    /' "$WORK/err.txt" | head -20
    fi
}

expect_stderr() {
    if ! grep -q -- "$1" "$WORK/err.txt"; then
        fail "stderr lacks '$1':"
        sed 's/^/    /' "$WORK/err.txt" | head -20
    fi
}

expect_file() { [[ -f "$1" ]] || fail "missing file $1"; }
expect_no_file() { [[ ! -e "$1" ]] || fail "unexpected $1"; }

# No temp files and no half-written final names are left in a directory.
expect_no_temp_files() {
    local found
    found=$(find "$1" -name '*.tmp' 2>/dev/null | head -5)
    [[ -z "$found" ]] || fail "temp files left behind: $found"
}

# A writable copy of a fixture.
fixture_copy() {
    local name=$1 target=$2
    cp -r "$Z2F_FIXTURES/$name" "$target"
}
