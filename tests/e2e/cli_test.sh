#!/usr/bin/env bash
# Command-line behaviour of zero2fp32-mpi: usage errors, zero_to_fp32-compatible arguments,
# --dry-run, existing and stale outputs, --verify, the summary JSON, HF side files.
source "$(dirname "$0")/lib.sh"

case_start "usage errors exit 2 with one line from rank 0 only"
run_mpi 2
expect_rc 2
expect_stderr "CKPT_DIR and OUT_DIR are required"
[[ $(grep -c "zero2fp32-mpi:" "$WORK/err.txt") -eq 1 ]] || fail "error printed more than once"
for bad in "--format torch --safe_serialization" "--dtype fp8" "--buffer-size 1" "--max-shard-size 5GiX" \
           "--max-shard-size 0" "--buffer-size 16M" "--overwrite --resume" "--parity --dtype bf16" "--io aio" \
           "--hdf5-bf16 float" "--nonsense" "--tag="; do
    # shellcheck disable=SC2086
    run_single "$Z2F_FIXTURES/z2_ws1_fp32" "$WORK/never" $bad
    expect_rc 2
    expect_stderr "Try 'zero2fp32-mpi --help'"
done
expect_no_file "$WORK/never"

case_start "empty CKPT_DIR, OUT_DIR or tag: usage errors"
for args in "'' $WORK/never" "$Z2F_FIXTURES/z2_ws1_fp32 ''" "$Z2F_FIXTURES/z2_ws1_fp32 $WORK/never -t ''"; do
    eval "run_single $args"
    expect_rc 2
done
expect_stderr "tag is empty"
expect_no_file "$WORK/never"

case_start "size options take decimal and binary units; errors quote the text"
run_single "$Z2F_FIXTURES/z3_ws4_fp32" "$WORK/units" --max-shard-size 4KiB --buffer-size 1MB -q
expect_rc 0
[[ $(ls "$WORK/units" | grep -c 'of-00003') -eq 3 ]] || fail "4KiB shards: $(ls "$WORK/units")"
for bad in 5GiX abc 1e99; do
    run_single "$Z2F_FIXTURES/z3_ws4_fp32" "$WORK/never" --max-shard-size "$bad"
    expect_rc 2
    expect_stderr "'$bad'"
done
run_single --help
grep -q "KiB, MiB, GiB, TiB" "$WORK/out.txt" || fail "--help does not list the binary units"

case_start "a Hugging Face model folder as CKPT_DIR: not a DeepSpeed checkpoint"
mkdir -p "$WORK/hfmodel"
echo '{}' >"$WORK/hfmodel/config.json"
echo x >"$WORK/hfmodel/model.safetensors"
run_single "$WORK/hfmodel" "$WORK/never"
expect_rc 2
expect_stderr "not a DeepSpeed checkpoint: looked for a 'latest' file"
expect_stderr "Hugging Face model (config.json, model.safetensors)"

case_start "--strip-prefix that matches nothing: a warning naming it"
run_single "$Z2F_FIXTURES/z2_ws1_fp32" "$WORK/strip" --strip-prefix _orig_mod.
expect_rc 0
expect_stderr "warning: --strip-prefix '_orig_mod.' matches no tensor name"

case_start "--help and --version"
run_single --help
expect_rc 0
grep -q "Examples:" "$WORK/out.txt" || fail "--help has no examples"
grep -q "Exit codes" "$WORK/out.txt" || fail "--help has no exit codes"
run_single --version
expect_rc 0
grep -q "^zero2fp32-mpi " "$WORK/out.txt" || fail "--version output"

case_start "zero_to_fp32's own arguments work unchanged"
run_mpi 2 "$Z2F_FIXTURES/z2_ws2_multitag_fp32" "$WORK/zt" -t global_step1 --safe_serialization \
    --max_shard_size 5KB --exclude_frozen_parameters -q
expect_rc 0
expect_file "$WORK/zt/model.safetensors.index.json"
grep -q '"weight_map"' "$WORK/zt/model.safetensors.index.json" || fail "index has no weight_map"

case_start "--dry-run writes nothing"
run_mpi 3 "$Z2F_FIXTURES/z3_ws4_fp32" "$WORK/dry" --dry-run --max-shard-size 10KB
expect_rc 0
expect_no_file "$WORK/dry"
grep -q "model-00001-of-" "$WORK/out.txt" || fail "dry run does not list the files"
grep -q "bytes to read per input file" "$WORK/out.txt" || fail "dry run does not list input reads"

case_start "existing outputs are refused without --overwrite"
run_mpi 2 "$Z2F_FIXTURES/z2_ws2_fp32" "$WORK/ex" -q
expect_rc 0
run_mpi 2 "$Z2F_FIXTURES/z2_ws2_fp32" "$WORK/ex" -q
expect_rc 1
expect_stderr "already holds output files"

case_start "--dry-run into an existing OUT_DIR: the plan and each file's fate, nothing written"
listing=$(ls -la --time-style=full-iso "$WORK/ex")
for flags in "" "--resume" "--overwrite" "--max-shard-size 1KB --overwrite"; do
    # shellcheck disable=SC2086
    run_mpi 2 "$Z2F_FIXTURES/z2_ws2_fp32" "$WORK/ex" --dry-run $flags
    expect_rc 0
    grep -q "bytes to read per input file" "$WORK/out.txt" || fail "dry run $flags: no plan"
    case "$flags" in
        "") grep -q "model.safetensors  *refuse" "$WORK/out.txt" || fail "dry run: no refuse"
            grep -q "would refuse to start: .*already holds" "$WORK/out.txt" || fail "dry run: no reason" ;;
        --resume) grep -q "model.safetensors  *keep" "$WORK/out.txt" || fail "dry run --resume: no keep" ;;
        --overwrite) grep -q "model.safetensors  *rewrite" "$WORK/out.txt" || fail "dry run --overwrite: no rewrite" ;;
        *) grep -q "model.safetensors  *remove" "$WORK/out.txt" || fail "dry run, other shards: no remove" ;;
    esac
done
[[ "$(ls -la --time-style=full-iso "$WORK/ex")" == "$listing" ]] || fail "--dry-run changed OUT_DIR"
run_mpi 2 "$Z2F_FIXTURES/z2_ws2_fp32" "$WORK/ex" -q --overwrite
expect_rc 0

case_start "stale shards of another run are never mixed in"
run_mpi 2 "$Z2F_FIXTURES/z3_ws4_fp32" "$WORK/stale" -q --max-shard-size 10KB
expect_rc 0
run_mpi 2 "$Z2F_FIXTURES/z3_ws4_fp32" "$WORK/stale" -q --max-shard-size 5KB
expect_rc 1
expect_stderr "other outputs that would be mixed"
run_mpi 2 "$Z2F_FIXTURES/z3_ws4_fp32" "$WORK/stale" -q --max-shard-size 5KB --overwrite
expect_rc 0
[[ $(ls "$WORK/stale" | grep -c 'of-00002') -eq 0 ]] || fail "stale 2-shard files remain"
[[ $(ls "$WORK/stale" | grep -c 'of-00003') -eq 3 ]] || fail "the 3 new shards are missing"

case_start "--verify passes, then catches one corrupted byte"
run_mpi 2 "$Z2F_FIXTURES/z3_ws2_tied_fp32" "$WORK/ver" -q
expect_rc 0
run_mpi 2 "$Z2F_FIXTURES/z3_ws2_tied_fp32" "$WORK/ver" --verify
expect_rc 0
expect_stderr "every output byte matches"
size=$(stat -c %s "$WORK/ver/model.safetensors")
printf '\x55' | dd of="$WORK/ver/model.safetensors" bs=1 seek=$((size - 3)) conv=notrunc status=none
run_mpi 3 "$Z2F_FIXTURES/z3_ws2_tied_fp32" "$WORK/ver" --verify
expect_rc 1
expect_stderr "differs from the checkpoint"

case_start "--summary-json on success and on failure"
run_mpi 2 "$Z2F_FIXTURES/z3_ws2_bf16" "$WORK/sum" -q --summary-json "$WORK/summary.json"
expect_rc 0
grep -q '"status": "ok"' "$WORK/summary.json" || fail "summary status"
grep -q '"ds_version": "0.14.5"' "$WORK/summary.json" || fail "summary ds_version"
grep -q '"peak_rss_bytes"' "$WORK/summary.json" || fail "summary rss"
run_mpi 2 "$WORK/does-not-exist" "$WORK/sum2" -q --summary-json "$WORK/summary2.json"
expect_rc 1
grep -q '"status": "error"' "$WORK/summary2.json" || fail "failure summary status"
grep -q 'does not exist' "$WORK/summary2.json" || fail "failure summary message"

case_start "Hugging Face side files are copied unless --no-copy-hf-files"
fixture_copy z2_ws2_bf16 "$WORK/hf"
echo '{"model_type": "llama"}' >"$WORK/hf/config.json"
echo '{}' >"$WORK/hf/tokenizer_config.json"
run_mpi 2 "$WORK/hf" "$WORK/hf_out" -q
expect_rc 0
expect_file "$WORK/hf_out/config.json"
expect_file "$WORK/hf_out/tokenizer_config.json"
run_mpi 2 "$WORK/hf" "$WORK/hf_out2" -q --no-copy-hf-files
expect_rc 0
expect_no_file "$WORK/hf_out2/config.json"

case_start "refusals name the file and what to do"
fixture_copy z2_ws2_fp32 "$WORK/moe"
touch "$WORK/moe/global_step2/layer_0_expert_0_mp_rank_00_model_states.pt"
run_mpi 2 "$WORK/moe" "$WORK/moe_out"
expect_rc 1
expect_stderr "layer_0_expert_0_mp_rank_00_model_states.pt: Mixture-of-Experts"
expect_no_file "$WORK/moe_out"

finish
