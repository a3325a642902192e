#!/usr/bin/env bash
# Signals and changing inputs in the middle of a conversion, on a synthetic checkpoint big enough
# to be caught mid-run: SIGTERM (Slurm's time limit, scancel) must end with exit 3, no temp file
# and no index, and --resume must then complete with the bytes of an uninterrupted run; a rank
# killed with SIGKILL must leave no partial file under a final name; an input that shrinks under
# the reader (buffered or direct reads) is a clear error, never a crash; W = 1,024 rank files convert under
# a descriptor limit far below 2,048.
source "$(dirname "$0")/lib.sh"

CKPT="$WORK/ckpt"
"$Z2F_SYNTH" --preset tiny --hidden 1024 --layers 4 --stage 3 --world-size 4 --no-moments -q "$CKPT" \
    || { echo "cannot generate the checkpoint"; exit 1; }
# Slow on purpose (small buffer, bf16 conversion, small shards) so that signals land mid-run.
ARGS=(--buffer-size 64KiB --dtype bf16 --max-shard-size 8MB --progress never)

run_mpi 2 "$CKPT" "$WORK/reference" "${ARGS[@]}" -q
expect_rc 0
shards=$(ls "$WORK/reference" | grep -c '^model-')
echo "reference: $shards shards"

# Starts a conversion in the background; sets PID (mpiexec) and waits for the first final shard.
start_and_wait_for_first_shard() {
    local ranks=$1 out=$2
    shift 2
    # shellcheck disable=SC2086
    "$Z2F_MPIEXEC" -n "$ranks" $Z2F_MPIEXEC_FLAGS "$Z2F_BIN" "$CKPT" "$out" "${ARGS[@]}" "$@" \
        >"$WORK/out.txt" 2>"$WORK/err.txt" &
    PID=$!
    for _ in $(seq 1 3000); do
        compgen -G "$out/model-*-of-*.safetensors" >/dev/null && return 0
        kill -0 "$PID" 2>/dev/null || return 1
        sleep 0.01
    done
    return 1
}

rank_pids() { pgrep -f -- "$Z2F_BIN $CKPT" | grep -v "^$PID$"; }

case_start "SIGTERM mid-run: exit 3, temp files removed, no index; --resume completes identically"
out="$WORK/term"
if start_and_wait_for_first_shard 2 "$out"; then
    # Slurm signals every task of the step; do the same.
    kill -TERM $(rank_pids) 2>/dev/null
    wait "$PID"
    RC=$?
    expect_rc 3
    expect_stderr "interrupted by SIGTERM"
    expect_no_temp_files "$out"
    expect_no_file "$out/model.safetensors.index.json"
    complete=$(ls "$out" | grep -c '^model-')
    [[ $complete -ge 1 && $complete -lt $shards ]] || fail "$complete of $shards shards complete after SIGTERM"
    for file in "$out"/model-*.safetensors; do
        cmp -s "$file" "$WORK/reference/$(basename "$file")" || fail "$(basename "$file") is not complete"
    done
    run_mpi 3 "$CKPT" "$out" "${ARGS[@]}" --resume
    expect_rc 0
    diff -r "$WORK/reference" "$out" >/dev/null || fail "resumed output differs from an uninterrupted run"
else
    wait "$PID"
    fail "the conversion ended before it could be signalled"
fi

# What the launcher does with a signal of its own (README.md, "Exit codes"): mpiexec turns a
# SIGINT or SIGTERM it gets into SIGTERM to every rank (the ranks have process groups of their
# own, so a terminal's Ctrl-C reaches mpiexec only), after a delay, and exits 1 whatever the
# ranks exit with; the ranks stop as for any SIGTERM, say where it came from, and exit 3 (in the
# summary). mpiexec's delay can outlast this small conversion, so each write of the ranks is
# slowed by 2 ms (strace's fault injection; -D keeps the rank a child of the launcher).
if command -v strace >/dev/null; then
    for sig in INT TERM; do
        case_start "SIG$sig to mpiexec itself: mpiexec exits 1, the ranks exit 3 and name the launcher"
        out="$WORK/launcher_$sig"
        # shellcheck disable=SC2086
        "$Z2F_MPIEXEC" -n 2 $Z2F_MPIEXEC_FLAGS strace -D -qq -f -o /dev/null -e trace=pwrite64 \
            -e inject=pwrite64:delay_enter=2000 "$Z2F_BIN" "$CKPT" "$out" "${ARGS[@]}" \
            --summary-json "$WORK/launcher_$sig.json" >"$WORK/out.txt" 2>"$WORK/err.txt" &
        PID=$!
        for _ in $(seq 1 3000); do
            compgen -G "$out/model-*-of-*.safetensors" >/dev/null && break
            sleep 0.01
        done
        kill -"$sig" "$PID"
        wait "$PID"
        RC=$?
        expect_rc 1
        grep -q '"exit_code": 3' "$WORK/launcher_$sig.json" || fail "the ranks' summary: $(head -c 300 "$WORK/launcher_$sig.json")"
        grep -q 'interrupted by SIGTERM from the launcher' "$WORK/launcher_$sig.json" \
            || fail "the ranks do not say the launcher sent SIGTERM: $(grep message "$WORK/launcher_$sig.json")"
        expect_no_temp_files "$out"
    done
else
    echo "note: launcher signal cases skipped (needs strace: scripts/install-deps.sh --test)"
fi

case_start "SIGINT without a launcher (kill -INT on a bare run): exit 3, says who sent it"
out="$WORK/bare_int"
"$Z2F_BIN" "$CKPT" "$out" "${ARGS[@]}" --summary-json "$WORK/bare_int.json" >"$WORK/out.txt" 2>"$WORK/err.txt" &
PID=$!
for _ in $(seq 1 3000); do
    compgen -G "$out/model-*-of-*.safetensors" >/dev/null && break
    sleep 0.01
done
kill -INT "$PID"
wait "$PID"
RC=$?
expect_rc 3
# This shell sent it: the run's parent, which is no launcher.
expect_stderr "interrupted by SIGINT from the parent process (pid $$)"
grep -q "from the launcher" "$WORK/err.txt" && fail "a bare run names a launcher that does not exist"
grep -q '"exit_code": 3' "$WORK/bare_int.json" || fail "no exit code 3 in the summary"
expect_no_temp_files "$out"

case_start "SIGKILL of one rank: the launcher ends the job, no partial final-named file; --resume completes"
out="$WORK/kill"
if start_and_wait_for_first_shard 3 "$out"; then
    kill -KILL $(rank_pids | head -1) 2>/dev/null
    wait "$PID"
    RC=$?
    [[ $RC -ne 0 ]] || fail "the job exited 0 after a rank was killed"
    for file in "$out"/model-*.safetensors; do
        cmp -s "$file" "$WORK/reference/$(basename "$file")" || fail "$(basename "$file") is partial under its final name"
    done
    expect_no_file "$out/model.safetensors.index.json"
    run_mpi 2 "$CKPT" "$out" "${ARGS[@]}" --resume
    expect_rc 0
    diff -r "$WORK/reference" "$out" >/dev/null || fail "resumed output differs from an uninterrupted run"
    expect_no_temp_files "$out"
else
    wait "$PID"
    fail "the conversion ended before a rank could be killed"
fi

for read in buffered direct; do
    io=$read
    case_start "an input file shrinks during the run (--read-mode $read): a clean error"
    cp -r "$CKPT" "$WORK/shrink_$io"
    victim=$(compgen -G "$WORK/shrink_$io/global_step2/*zero_pp_rank_3_mp_rank_00_optim_states.pt")
    [[ -f "$victim" ]] || { fail "no rank-3 optimizer file in the synthetic checkpoint"; continue; }
    out="$WORK/shrunk_$io"
    saved=$CKPT
    CKPT="$WORK/shrink_$io"
    if start_and_wait_for_first_shard 2 "$out" --read-mode "$read"; then
        truncate -s $(( $(stat -c %s "$victim") / 3 )) "$victim"
        wait "$PID"
        RC=$?
        expect_rc 1
        grep -q -E "zero_pp_rank_3_mp_rank_00_optim_states.pt: (file is truncated|shrank while being read|changed during the conversion)" \
            "$WORK/err.txt" || { fail "no clear error naming the shrunk file:"; sed 's/^/    /' "$WORK/err.txt" | head; }
        expect_no_temp_files "$out"
        expect_no_file "$out/model.safetensors.index.json"
    else
        wait "$PID"
        fail "the conversion ended before the input could be truncated"
    fi
    CKPT=$saved
done

case_start "W = 1,024: 2,048 input files under a 200-descriptor limit"
"$Z2F_SYNTH" --preset tiny --layers 2 --stage 3 --world-size 1024 --no-moments -q "$WORK/w1024" \
    || fail "cannot generate the W=1024 checkpoint"
for ranks in 1 3; do
    # shellcheck disable=SC2086
    for mode in convert verify; do
        flag=()
        [[ $mode == verify ]] && flag=(--verify)
        # shellcheck disable=SC2086
        (ulimit -n 200; exec "$Z2F_MPIEXEC" -n "$ranks" $Z2F_MPIEXEC_FLAGS "$Z2F_BIN" "$WORK/w1024" "$WORK/w1024_out$ranks" \
            "${flag[@]}" --summary-json "$WORK/w1024_$ranks.json" -q) >"$WORK/out.txt" 2>"$WORK/err.txt"
        RC=$?
        expect_rc 0
        peak=$(grep -o '"peak_open_inputs": [0-9]*' "$WORK/w1024_$ranks.json" | grep -o '[0-9]*$')
        [[ -n "$peak" && $peak -le 100 ]] || fail "peak open inputs $peak at $ranks rank(s) ($mode)"
        echo "  $ranks rank(s), $mode: at most $peak input files open at once"
    done
done

finish
