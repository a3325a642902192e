#!/usr/bin/env bash
# Faults during a conversion, at 1 and 3 ranks: a full disk (RLIMIT_FSIZE), a failure on one rank
# only, an unreadable input, an unwritable output directory. Each must end with a clear error, a
# non-zero exit (not a signal), no temp file and no index left behind; --resume then completes
# the output with exactly the bytes of an uninterrupted run.
source "$(dirname "$0")/lib.sh"

FIXTURE="$Z2F_FIXTURES/z3_ws4_fp32"

# A full disk, for both write paths. Buffered (--io pread): three shards with --max-shard-size
# 4KB, 7,956, 6,260 and 992 bytes; a 7 KiB file-size limit lets the two small ones complete and
# makes the big one fail with EFBIG. Direct (the default): a file's last block goes out padded
# to 4 KiB (then the size is cut back), so the limit must sit on a 4 KiB step: with
# --max-shard-size 10KB the shards are 8,368 and 6,808 bytes, and an 8 KiB limit lets the small
# one complete and stops the big one.
disk_full_case() {
    local io=$1 shard=$2 limit=$3 complete=$4 ranks=$5
    case_start "disk full (RLIMIT_FSIZE), --io $io, at $ranks rank(s), then --resume"
    local out="$WORK/full-$io-$ranks" reference="$WORK/reference-$io"
    if [[ ! -d $reference ]]; then
        run_mpi 2 "$FIXTURE" "$reference" --max-shard-size "$shard" --io "$io" -q
        expect_rc 0
    fi
    # The limit applies to the ranks only: mpiexec itself writes larger session files.
    # shellcheck disable=SC2086
    "$Z2F_MPIEXEC" -n "$ranks" $Z2F_MPIEXEC_FLAGS bash -c "ulimit -f $limit; exec '$Z2F_BIN' '$FIXTURE' '$out' --max-shard-size $shard --io $io --progress never" \
        >"$WORK/out.txt" 2>"$WORK/err.txt"
    RC=$?
    expect_rc 1
    expect_stderr "File too large"
    expect_stderr "no index written"
    expect_no_file "$out/model.safetensors.index.json"
    expect_no_temp_files "$out"
    expect_file "$out/.zero2fp32-run.json"
    run_mpi "$ranks" "$FIXTURE" "$out" --max-shard-size "$shard" --io "$io" --resume
    expect_rc 0
    # One rank writes the small shards first and fails on the big one: they are complete. At
    # three ranks the peers' small shards race the failing rank's message, which stops them
    # between buffers; whatever they finished must be kept, but how much is timing.
    if [[ $ranks -eq 1 ]]; then
        [[ $(grep -c "is complete, skipped" "$WORK/err.txt") -eq $complete ]] || fail "--resume did not skip the $complete complete shard(s)"
    fi
    diff -r "$reference" "$out" >/dev/null || fail "resumed output differs from an uninterrupted run"
    grep -q '"state": "complete"' "$out/.zero2fp32-run.json" || fail "the run record is not marked complete"
}
for ranks in 1 3; do
    disk_full_case pread 4KB 7 2 "$ranks"
    disk_full_case direct 10KB 8 1 "$ranks"
done
limit=7

case_start "a failure on one rank only stops every rank within seconds"
out="$WORK/one_rank"
start=$(date +%s)
# shellcheck disable=SC2086
"$Z2F_MPIEXEC" $Z2F_MPIEXEC_FLAGS -n 1 bash -c "ulimit -f $limit; exec '$Z2F_BIN' '$FIXTURE' '$out' --max-shard-size none --progress never" \
    : -n 2 "$Z2F_BIN" "$FIXTURE" "$out" --max-shard-size none --progress never >"$WORK/out.txt" 2>"$WORK/err.txt"
RC=$?
elapsed=$(( $(date +%s) - start ))
[[ $RC -ne 0 && $RC -lt 128 ]] || fail "exit code $RC (expected an error, not a signal)"
[[ $elapsed -lt 30 ]] || fail "took ${elapsed}s"
expect_stderr "File too large"
[[ $(grep -c "error: " "$WORK/err.txt") -eq 1 ]] || fail "the failing rank's message is not printed exactly once"
expect_no_file "$out/model.safetensors"
expect_no_temp_files "$out"

case_start "output path under a regular file"
echo x >"$WORK/plainfile"
run_mpi 3 "$FIXTURE" "$WORK/plainfile/out"
expect_rc 1
expect_stderr "plainfile"

if command -v setpriv >/dev/null && [[ $(id -u) -eq 0 ]]; then
    # Permissions only bind unprivileged users: run the job as nobody. nobody may not reach the
    # build tree (a clone in /root is mode 700), so it runs a copy of the binary and of the
    # project's libraries placed in $WORK, which it can reach.
    chmod 1777 "$WORK"
    # As a clone in /root has it: the binary under test where only root can reach it.
    mkdir -m 700 "$WORK/private"
    cp "$Z2F_BIN" "$WORK/private/"
    Z2F_BIN="$WORK/private/$(basename "$Z2F_BIN")"
    mkdir -p "$WORK/bin"
    cp "$Z2F_BIN" "$WORK/bin/"
    for lib in $(ldd "$Z2F_BIN" | awk '$3 ~ /libzero2fp32/ {print $3}'); do cp "$lib" "$WORK/bin/"; done
    chmod -R a+rX "$WORK/bin"
    nobody() {
        # shellcheck disable=SC2086
        HOME="$WORK" TMPDIR="$WORK" LD_LIBRARY_PATH="$WORK/bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
            setpriv --reuid=65534 --regid=65534 --clear-groups \
            "$Z2F_MPIEXEC" -n "$1" --oversubscribe -x LD_LIBRARY_PATH "$WORK/bin/$(basename "$Z2F_BIN")" "${@:2}" \
            >"$WORK/out.txt" 2>"$WORK/err.txt"
        RC=$?
    }
    cp -r "$Z2F_FIXTURES/z3_ws2_tied_fp32" "$WORK/ckpt"
    chmod -R a+rX "$WORK/ckpt"
    for ranks in 1 3; do
        case_start "an unreadable input file at $ranks rank(s)"
        chmod 000 "$WORK/ckpt/global_step2/zero_pp_rank_1_mp_rank_00_optim_states.pt"
        nobody "$ranks" "$WORK/ckpt" "$WORK/unreadable$ranks"
        expect_rc 1
        expect_stderr "zero_pp_rank_1_mp_rank_00_optim_states.pt': Permission denied"
        expect_no_file "$WORK/unreadable$ranks"
        chmod 644 "$WORK/ckpt/global_step2/zero_pp_rank_1_mp_rank_00_optim_states.pt"

        case_start "an unwritable output directory at $ranks rank(s)"
        mkdir -p "$WORK/readonly$ranks"
        chmod 755 "$WORK/readonly$ranks"
        nobody "$ranks" "$WORK/ckpt" "$WORK/readonly$ranks/out"
        expect_rc 1
        expect_stderr "permission denied"
        expect_no_file "$WORK/readonly$ranks/out"
    done
else
    echo "note: unprivileged cases skipped (needs root and setpriv)"
fi

finish
