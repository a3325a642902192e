#!/usr/bin/env bash
# --format universal and universal input through the command line: usage errors, the dry run,
# a conversion beside the original, -t TAG_universal and --from-universal back to safetensors,
# and a full disk mid-run followed by --resume, which keeps the finished files and ends with the
# bytes of an uninterrupted run (docs/universal-checkpoint.md).
source "$(dirname "$0")/lib.sh"

FIXTURE="$Z2F_FIXTURES/z3_ws4_fp32"

case_start "options that shape Hugging Face output are usage errors with --format universal"
for bad in "--dtype bf16" "--max-shard-size 1GB" "--max_shard_size 1GB" "--parity" \
           "--include fc1" "--strip-prefix x." "--untie" "--safe_serialization"; do
    # shellcheck disable=SC2086
    run_single "$FIXTURE" "$WORK/never" --format universal $bad
    expect_rc 2
    expect_stderr "universal"
done
expect_no_file "$WORK/never"

case_start "--dry-run lists one line per parameter folder and writes nothing"
run_mpi 3 "$FIXTURE" "$WORK/dry" --format universal --dry-run
expect_rc 0
expect_no_file "$WORK/dry"
grep -q "global_step2_universal/zero/fc1.weight/{fp32.pt,exp_avg.pt,exp_avg_sq.pt}" "$WORK/out.txt" ||
    fail "dry run does not group the parameter's files"
grep -q "^  latest_universal$" "$WORK/out.txt" || fail "dry run does not name latest_universal"
[[ $(grep -c "_universal/zero/" "$WORK/out.txt") -eq 9 ]] || fail "not one line per parameter (8) and optimizer_state.pt"

case_start "beside the original: only <tag>_universal/ and latest_universal appear"
fixture_copy z2_ws2_frozen_bf16 "$WORK/ckpt"
(cd "$WORK/ckpt" && find . -type f | sort | xargs sha256sum) >"$WORK/before.txt"
run_mpi 2 "$WORK/ckpt" "$WORK/ckpt" --format universal
expect_rc 0
expect_stderr "done:"
expect_file "$WORK/ckpt/latest_universal"
expect_file "$WORK/ckpt/global_step2_universal/zero/fc2.weight/step.pt"
expect_file "$WORK/ckpt/global_step2_universal/mp_rank_00_model_states.pt"
expect_file "$WORK/ckpt/global_step2_universal/.zero2fp32-run.json"  # the run record, kept
(cd "$WORK/ckpt" && sha256sum --quiet -c "$WORK/before.txt") || fail "an original file changed"
extra=$(cd "$WORK/ckpt" && find . -type f | sort | grep -v -e '^./latest_universal$' -e '^./global_step2_universal/' |
    diff - <(cut -c67- "$WORK/before.txt") || true)
[[ -z "$extra" ]] || fail "files other than the universal checkpoint appeared: $extra"
run_mpi 2 "$WORK/ckpt" "$WORK/ckpt/out" --format universal
expect_rc 2
expect_stderr "inside the checkpoint"
expect_no_file "$WORK/ckpt/out"

case_start "-t TAG_universal and --from-universal convert the universal checkpoint"
run_mpi 2 "$WORK/ckpt" "$WORK/st_original" -q
expect_rc 0
run_mpi 2 "$WORK/ckpt" "$WORK/st_from" --from-universal -v
expect_rc 0
expect_stderr "global_step2_universal"
run_single "$WORK/ckpt" "$WORK/st_tag" -t global_step2_universal -q
expect_rc 0
cmp -s "$WORK/st_original/model.safetensors" "$WORK/st_from/model.safetensors" ||
    fail "--from-universal gives other safetensors"
cmp -s "$WORK/st_original/model.safetensors" "$WORK/st_tag/model.safetensors" ||
    fail "-t global_step2_universal gives other safetensors"

case_start "--verify alone checks a finished universal output"
run_mpi 3 "$WORK/ckpt" "$WORK/ckpt" --format universal --verify
expect_rc 0
expect_stderr "every output byte matches"

# A 7 KiB file-size limit (ulimit -f counts KiB) lets the small files complete and stops the
# first one above it (fc1.weight's tensor files, 7,844 bytes of data each).
run_mpi 2 "$FIXTURE" "$WORK/reference" --format universal -q
expect_rc 0
for ranks in 1 3; do
    case_start "disk full (RLIMIT_FSIZE) at $ranks rank(s), then --resume"
    out="$WORK/full$ranks"
    # shellcheck disable=SC2086
    "$Z2F_MPIEXEC" -n "$ranks" $Z2F_MPIEXEC_FLAGS bash -c "ulimit -f 7; exec '$Z2F_BIN' '$FIXTURE' '$out' --format universal --progress never" \
        >"$WORK/out.txt" 2>"$WORK/err.txt"
    RC=$?
    expect_rc 1
    expect_stderr "File too large"
    expect_no_file "$out/latest_universal"
    expect_no_temp_files "$out"
    expect_file "$out/global_step2_universal/.zero2fp32-run.json"
    run_mpi "$ranks" "$FIXTURE" "$out" --format universal --resume
    expect_rc 0
    if [[ $ranks -eq 1 ]]; then
        grep -q "output file(s) are complete and kept" "$WORK/err.txt" || fail "--resume kept no finished file"
    fi
    diff -r -x .zero2fp32-run.json "$WORK/reference" "$out" >/dev/null ||
        fail "resumed output differs from an uninterrupted run"
    expect_file "$out/global_step2_universal/.zero2fp32-run.json"  # kept, marked complete
done

finish
