#!/usr/bin/env bash
# Faults during a conversion, at 1 and 3 ranks: a full disk (RLIMIT_FSIZE), a failure on one rank
# only, an unreadable input, an unwritable output directory. Each must end with a clear error, a
# non-zero exit (not a signal), no temp file and no index left behind; --resume then completes
# the output with exactly the bytes of an uninterrupted run.
source "$(dirname "$0")/lib.sh"

FIXTURE="$Z2F_FIXTURES/z3_ws4_fp32"

# A full disk, for both write paths. Buffered (--io buffered): three shards with --max-shard-size
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
        grep -q "resume: $complete of [0-9]* output file(s) are complete and kept" "$WORK/err.txt" || fail "--resume did not keep the $complete complete shard(s)"
    fi
    diff -r "$reference" "$out" >/dev/null || fail "resumed output differs from an uninterrupted run"
    grep -q '"state": "complete"' "$out/.zero2fp32-run.json" || fail "the run record is not marked complete"
}
for ranks in 1 3; do
    disk_full_case buffered 4KB 7 2 "$ranks"
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

# Faults injected by the kernel's side of the system call (strace --inject), independently of
# the converter's own call hook that the sweep test uses (tests/mpi/fault_sweep_test.cpp). Only
# the main thread is traced: that is where files are published and the index is written.
if command -v strace >/dev/null && strace -o /dev/null -e inject=getpid:error=EIO true 2>/dev/null; then
    SHARDED=(--max-shard-size 2KB)
    run_single "$FIXTURE" "$WORK/strace_reference" "${SHARDED[@]}" -q
    expect_rc 0
    strace -o "$WORK/renames.txt" -e trace=rename "$Z2F_BIN" "$FIXTURE" "$WORK/strace_clean" "${SHARDED[@]}" -q
    index_rename=$(grep -n 'index.json"' "$WORK/renames.txt" | cut -d: -f1)
    # strace_run OUT SYSCALL N: the Nth call of SYSCALL in the main thread fails with EIO.
    strace_run() {
        strace -o /dev/null -e trace="$2" -e inject="$2":error=EIO:when="$3" \
            "$Z2F_BIN" "$FIXTURE" "$1" "${SHARDED[@]}" --progress never >"$WORK/out.txt" 2>"$WORK/err.txt"
        RC=$?
    }
    # Every final-named file is the reference's; the index only with every file.
    expect_only_complete_files() {
        local out=$1 name
        for file in "$out"/model*; do
            [[ -e $file ]] || continue
            name=$(basename "$file")
            [[ $name == *.tmp ]] && continue
            cmp -s "$file" "$WORK/strace_reference/$name" || fail "$name is published but not complete"
        done
        if [[ -e "$out/model.safetensors.index.json" ]]; then
            for file in "$WORK/strace_reference"/model-*; do
                [[ -e "$out/$(basename "$file")" ]] || fail "the index is written without $(basename "$file")"
            done
        fi
    }

    case_start "the index's rename fails: every file is complete, and the message says so"
    strace_run "$WORK/no_index" rename "$index_rename"
    expect_rc 1
    expect_stderr "all 3 output file(s) are complete, but model.safetensors.index.json was not written"
    expect_no_file "$WORK/no_index/model.safetensors.index.json"
    expect_only_complete_files "$WORK/no_index"
    run_single "$FIXTURE" "$WORK/no_index" --resume
    expect_rc 0
    diff -r "$WORK/strace_reference" "$WORK/no_index" >/dev/null || fail "--resume did not complete the output"

    case_start "marking the run record complete fails: the output is complete, and the message says so"
    strace_run "$WORK/record" rename $((index_rename + 1))
    expect_rc 1
    expect_stderr "the output is complete on disk (3 file(s) and model.safetensors.index.json)"
    expect_no_temp_files "$WORK/record"
    run_single "$FIXTURE" "$WORK/record" --resume
    expect_rc 0
    expect_stderr "nothing to do"
    grep -q '"state": "complete"' "$WORK/record/.zero2fp32-run.json" || fail "the run record is not marked complete"

    # Every write, sync, size, rename and open, in turn, for both write paths. strace counts
    # calls per thread: `when=N` fails the Nth call of every thread at once (the I/O engine's
    # workers too), so each run may see several faults, which must not break the rule either.
    for io in direct buffered; do
        for syscall in pwrite64 fdatasync fsync ftruncate fallocate rename openat; do
            case_start "every $syscall failing in turn, in every thread (--io $io)"
            counted="$WORK/strace_count_${io}_$syscall"
            strace -f -y -o "$WORK/calls.txt" -e trace="$syscall" "$Z2F_BIN" "$FIXTURE" "$counted" \
                "${SHARDED[@]}" --io "$io" -q
            # The call numbers N at which, in every thread, the Nth call (if any) is on the
            # checkpoint or the output (not the dynamic loader's, say).
            picks=$(grep " $syscall(" "$WORK/calls.txt" | awk -v ours="$FIXTURE|$counted" '
                { n = ++count[$1]; if ($0 !~ ours) foreign[n] = 1; else mine[n] = 1 }
                END { for (n in mine) if (!(n in foreign)) print n }' | sort -n)
            echo "    $(echo "$picks" | wc -w) call numbers"
            for n in $picks; do
                out="$WORK/strace_${io}_${syscall}_$n"
                strace -f -o /dev/null -e trace="$syscall" -e inject="$syscall":error=EIO:when="$n" \
                    "$Z2F_BIN" "$FIXTURE" "$out" "${SHARDED[@]}" --io "$io" --progress never \
                    >"$WORK/out.txt" 2>"$WORK/err.txt"
                RC=$?
                [[ $RC -eq 0 || $RC -eq 1 ]] || fail "$syscall #$n: exit code $RC"
                expect_only_complete_files "$out"
                [[ -d $out ]] || continue
                run_single "$FIXTURE" "$out" "${SHARDED[@]}" --io "$io" --resume
                [[ $RC -eq 0 ]] || fail "$syscall #$n, then --resume: exit code $RC: $(head -3 "$WORK/err.txt")"
                diff -r "$WORK/strace_reference" "$out" >/dev/null || fail "$syscall #$n, then --resume: not the reference"
            done
        done
    done
else
    echo "note: strace fault injection cases skipped (no strace, or no --inject)"
fi

finish
