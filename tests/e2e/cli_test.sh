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
           "--hdf5-bf16 float" "--nonsense" "--tag=" "--block-size 1000" "--block-size 2GiB" \
           "--read-mode cached"; do
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
for line in "^MPI: ." "^direct I/O engine: \(io_uring\|threads\)" "^CRC-32: \(ISA-L\|zlib\)" "^HDF5 output: "; do
    grep -q "$line" "$WORK/out.txt" || fail "--version lacks '$line': $(cat "$WORK/out.txt")"
done
if [[ "${Z2F_WITH_HDF5:-1}" == 1 ]]; then
    grep -q "^HDF5 output: yes" "$WORK/out.txt" || fail "--version: HDF5 built in, not said"
else
    grep -q "^HDF5 output: no" "$WORK/out.txt" || fail "--version: HDF5 not built in, not said"
fi

case_start "the spellings of PyTorch and Hugging Face users: --format bin|pt|pytorch|st, --dtype bfloat16|float32|float16"
run_single "$Z2F_FIXTURES/z2_ws1_fp32" "$WORK/alias_bf16" --dtype bf16 -q
expect_rc 0
for format in bin pt pytorch; do
    run_single "$Z2F_FIXTURES/z2_ws1_fp32" "$WORK/alias_$format" --format "$format" --dtype bfloat16 -q
    expect_rc 0
    expect_file "$WORK/alias_$format/pytorch_model.bin"
done
run_single "$Z2F_FIXTURES/z2_ws1_fp32" "$WORK/alias_st" --format st --dtype bfloat16 -q
expect_rc 0
cmp -s "$WORK/alias_st/model.safetensors" "$WORK/alias_bf16/model.safetensors" \
    || fail "--format st --dtype bfloat16 differs from the default format with --dtype bf16"
for dtype in float32 float16; do
    run_single "$Z2F_FIXTURES/z2_ws1_fp32" "$WORK/alias_$dtype" --dtype "$dtype" -q
    expect_rc 0
done
cmp -s "$WORK/alias_float32/model.safetensors" "$WORK/alias_bf16/model.safetensors" \
    && fail "--dtype float32 wrote bf16"
run_single "$Z2F_FIXTURES/z2_ws1_fp32" "$WORK/alias_f16" --dtype fp16 -q
cmp -s "$WORK/alias_float16/model.safetensors" "$WORK/alias_f16/model.safetensors" \
    || fail "--dtype float16 differs from --dtype fp16"
run_single "$Z2F_FIXTURES/z2_ws1_fp32" "$WORK/never" --format binary
expect_rc 2

case_start "a tag folder and a tag: both named, and which to drop"
run_single "$Z2F_FIXTURES/z2_ws2_multitag_fp32/global_step2" "$WORK/never" -t global_step1
expect_rc 2
expect_stderr "CKPT_DIR is a tag folder itself ('global_step2'), and a tag was given too (-t global_step1)"
expect_stderr "-t global_step1, or the tag folder '.*global_step1' alone"
run_single "$Z2F_FIXTURES/z2_ws2_multitag_fp32/global_step2" "$WORK/never" -t global_step2
expect_rc 2
expect_stderr "drop -t global_step2"
run_single "$Z2F_FIXTURES/z2_ws2_multitag_fp32" "$WORK/never" -t global_step9
expect_rc 2
expect_stderr "tag folder 'global_step9' does not exist (tags here: global_step1, global_step2"
run_single "$WORK/no-such-checkpoint" "$WORK/never"
expect_rc 2
expect_stderr "checkpoint directory does not exist"
expect_no_file "$WORK/never"

case_start "zero_to_fp32's own arguments work unchanged"
run_mpi 2 "$Z2F_FIXTURES/z2_ws2_multitag_fp32" "$WORK/zt" -t global_step1 --safe_serialization \
    --max_shard_size 5KB --exclude_frozen_parameters -q
expect_rc 0
expect_file "$WORK/zt/model.safetensors.index.json"
grep -q '"weight_map"' "$WORK/zt/model.safetensors.index.json" || fail "index has no weight_map"

if [[ "${Z2F_WITH_HDF5:-1}" == 1 ]]; then
case_start "HDF5 is loaded only for --format hdf5, from the module next to the library"
lib_dir=$(dirname "$(ldd "$Z2F_BIN" | awk '/libzero2fp32\.so/ {print $3}')")
[[ -f "$lib_dir/libzero2fp32_hdf5.so" ]] || fail "no HDF5 module next to the library in '$lib_dir'"
if ldd "$Z2F_BIN" | grep -q hdf5; then fail "zero2fp32-mpi maps HDF5 at start-up: $(ldd "$Z2F_BIN" | grep hdf5)"; fi
run_mpi 2 "$Z2F_FIXTURES/z3_ws4_fp32" "$WORK/h5" --format hdf5 -q
expect_rc 0
[[ -s "$WORK/h5/model.h5" ]] || fail "no model.h5: $(ls "$WORK/h5")"
[[ $(head -c 4 "$WORK/h5/model.h5" | tail -c 3) == HDF ]] || fail "model.h5 has no HDF5 signature"

case_start "zero2fp32-inspect reads the .h5 it writes: the tensors of the safetensors output, aliases as links"
run_single "$Z2F_FIXTURES/z3_ws2_tied_fp32" "$WORK/tied_h5" --format hdf5 -q
expect_rc 0
run_single "$Z2F_FIXTURES/z3_ws2_tied_fp32" "$WORK/tied_st" --untie -q
expect_rc 0
"$Z2F_INSPECT" "$WORK/tied_h5/model.h5" >"$WORK/h5.txt" 2>&1 || fail "inspect .h5: $(cat "$WORK/h5.txt")"
"$Z2F_INSPECT" "$WORK/tied_st/model.safetensors" >"$WORK/st.txt" 2>&1 || fail "inspect .safetensors"
grep -q "^attribute: format = zero2fp32" "$WORK/h5.txt" || fail "no root attribute: $(cat "$WORK/h5.txt")"
grep -q "^  lm_head.weight  *= embed.weight (hard link: tied alias)" "$WORK/h5.txt" \
    || fail "the tied alias is not shown as a link: $(cat "$WORK/h5.txt")"
# name, dtype and shape of every other tensor as the safetensors header has them
columns() { grep "^  " "$1" | grep -v "hard link" | sed 's/ @ .*//' | awk '{$1 = $1; print}' | sort; }
[[ "$(columns "$WORK/h5.txt")" == "$(columns "$WORK/st.txt" | grep -v '^lm_head.weight ')" ]] \
    || fail "the .h5 tensors differ from the safetensors ones: $(diff <(columns "$WORK/h5.txt") <(columns "$WORK/st.txt"))"
else
case_start "a build without HDF5: --format hdf5 and inspecting an .h5 are refused, naming the build option"
run_mpi 2 "$Z2F_FIXTURES/z3_ws4_fp32" "$WORK/h5" --format hdf5
expect_rc 2
expect_stderr "-DZ2F_WITH_HDF5=ON"
expect_no_file "$WORK/h5"
printf '\x89HDF\r\n\x1a\n' >"$WORK/fake.h5"
"$Z2F_INSPECT" "$WORK/fake.h5" >"$WORK/h5.txt" 2>&1
[[ $? -eq 2 ]] || fail "inspect of an .h5 without HDF5: exit code"
grep -q -- "-DZ2F_WITH_HDF5=ON" "$WORK/h5.txt" || fail "inspect does not name the option: $(cat "$WORK/h5.txt")"
fi

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

case_start "a damaged storage record: exit 1 naming file and record; --no-input-crc converts"
cp -r "$Z2F_FIXTURES/z3_ws2_fp32" "$WORK/damaged"
optim="$WORK/damaged/global_step2/zero_pp_rank_1_mp_rank_00_optim_states.pt"
# The fp32 partition is the record the last tensor line of inspect names (data/3 here).
offset=$("$Z2F_INSPECT" "$optim" | grep -o '@ file offset [0-9]*' | tail -1 | grep -o '[0-9]*$')
[[ -n "$offset" ]] || fail "inspect printed no file offset"
printf '\x41' | dd of="$optim" bs=1 seek=$((offset + 100)) conv=notrunc status=none
for ranks in 1 3; do
    run_mpi "$ranks" "$WORK/damaged" "$WORK/damaged_out" -q --max-shard-size 3KB
    expect_rc 1
    expect_stderr "zero_pp_rank_1_mp_rank_00_optim_states.pt': record 'zero_pp_rank_1_mp_rank_00_optim_states/data/3'"
    expect_stderr "fails its CRC-32 check"
    expect_no_file "$WORK/damaged_out/model.safetensors.index.json"
done
run_mpi 2 "$WORK/damaged" "$WORK/damaged_out" -q --max-shard-size 3KB --overwrite --no-input-crc
expect_rc 0
expect_file "$WORK/damaged_out/model.safetensors.index.json"
# --verify reads the same inputs: a damaged one fails it even where the outputs match it.
run_mpi 2 "$WORK/damaged" "$WORK/damaged_out" --verify
expect_rc 1
expect_stderr "input check:"

case_start "--summary-json on success and on failure"
run_mpi 2 "$Z2F_FIXTURES/z3_ws2_bf16" "$WORK/sum" -q --summary-json "$WORK/summary.json"
expect_rc 0
grep -q '"status": "ok"' "$WORK/summary.json" || fail "summary status"
grep -q '"ds_version": "0.14.5"' "$WORK/summary.json" || fail "summary ds_version"
grep -q '"peak_rss_bytes"' "$WORK/summary.json" || fail "summary rss"
grep -A2 '"io_wait_seconds"' "$WORK/summary.json" | grep -q '"writes"' || fail "summary io waits"
run_mpi 2 "$WORK/does-not-exist" "$WORK/sum2" -q --summary-json "$WORK/summary2.json"
expect_rc 2
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

case_start "a stray expert file next to a data-parallel checkpoint is named"
fixture_copy z2_ws2_fp32 "$WORK/moe"
touch "$WORK/moe/global_step2/layer_0_expert_0_mp_rank_00_model_states.pt"
run_mpi 2 "$WORK/moe" "$WORK/moe_out"
expect_rc 1
expect_stderr "layer_0_expert_0_mp_rank_00_model_states.pt: "
expect_no_file "$WORK/moe_out"

# --- tensor-, pipeline- and expert-parallel checkpoints ---------------------------------------
# Synthetic copies of the parallel fixtures (rules removed, a replica changed, refused layouts)
# come from the corrupt-corpus tool.
PARALLEL="$Z2F_FIXTURES/../deepspeed-parallel"
"$Z2F_CORPUS_TOOL" "$Z2F_FIXTURES" "$WORK/corpus" >/dev/null || fail "cannot build the corpus"

case_start "--dry-run and -d show the grid and the merge rule of every tensor"
run_mpi 2 "$PARALLEL/tp2_dp2_z1_fp32" "$WORK/tp_dry" --dry-run
expect_rc 0
expect_no_file "$WORK/tp_dry"
for text in "grid: tensor-parallel, TP 2 x PP 1 x DP 2" "mp_rank_01_model_states.pt  *model states, TP rank 1" \
            "dense_4h_to_h.weight  *cat dim 1 over 2 TP ranks" "2 sub-parameters along dim 0" \
            "final_layernorm.bias  *replicated over 2 TP ranks, checked equal" "padded vocabulary kept"; do
    grep -q -- "$text" "$WORK/out.txt" || fail "dry run lacks '$text'"
done
run_mpi 1 "$PARALLEL/moe_ep2_dp2_z2_fp32" "$WORK/moe_dry" --dry-run -d
expect_rc 0
grep -q "grid: mixture-of-experts, TP 1 x PP 1 x DP 4, EP 2" "$WORK/out.txt" || fail "MoE grid"
expect_stderr "deepspeed_experts.3.0.weight full shape: (23, 16).*expert 3 of 4, MoE layer 0"
run_mpi 1 "$PARALLEL/pp2_dp2_z1_fp32" "$WORK/pp_dry" --dry-run
grep -q "layer_04-model_states.pt  *pipeline layer 4" "$WORK/out.txt" || fail "pipeline grid"
grep -q "^  4.weight  *stage 1" "$WORK/out.txt" || fail "pipeline stage of 4.weight"

case_start "parallel checkpoints convert and --verify every byte"
for fixture in tp2_dp2_z1_fp32 pp2_dp2_z1_fp32 pp2_dp1_z0_fp32 moe_ep2_dp2_z2_fp32; do
    run_mpi 3 "$PARALLEL/$fixture" "$WORK/par_$fixture" -q --max-shard-size 3KB
    expect_rc 0
    expect_file "$WORK/par_$fixture/model.safetensors.index.json"
    # --verify only reads: every byte against the checkpoint, on another rank count.
    run_mpi 2 "$PARALLEL/$fixture" "$WORK/par_$fixture" --verify
    expect_rc 0
    expect_stderr "every output byte matches"
done

case_start "a TP checkpoint without rules is refused and converts with --tp-rules"
run_mpi 2 "$WORK/corpus/tp_without_rules" "$WORK/norules"
expect_rc 1
expect_stderr "without merge rules"
expect_stderr "give them with --tp-rules FILE"
expect_no_file "$WORK/norules"
run_mpi 2 "$PARALLEL/tp2_dp2_z1_fp32" "$WORK/tp_own" -q --max-shard-size none --summary-json "$WORK/tp.json"
expect_rc 0
grep -q '"kind": "tensor-parallel"' "$WORK/tp.json" || fail "summary has no parallel grid"
grep -q '"tp_replicated": "check"' "$WORK/tp.json" || fail "summary has no --tp-replicated"
run_mpi 3 "$WORK/corpus/tp_without_rules" "$WORK/tp_file" -q --max-shard-size none --tp-rules "$PARALLEL/tp2_dp2_z1_fp32.tp-rules.json"
expect_rc 0
cmp -s "$WORK/tp_own/model.safetensors" "$WORK/tp_file/model.safetensors" ||
    fail "--tp-rules output differs from the checkpoint's own rules"
run_mpi 2 "$WORK/corpus/tp_without_rules" "$WORK/never" --tp-rules "$WORK/absent.json"
expect_rc 2
expect_stderr "absent.json: no such file"
echo '{"rules": {"x": "diagonal"}}' >"$WORK/bad_rules.json"
run_mpi 2 "$WORK/corpus/tp_without_rules" "$WORK/never" --tp-rules "$WORK/bad_rules.json"
expect_rc 1
expect_stderr "bad_rules.json"
expect_no_file "$WORK/never"

case_start "--tp-replicated: a mismatch names the parameter and its largest difference"
run_mpi 3 "$WORK/corpus/tp_replica_mismatch" "$WORK/mismatch"
expect_rc 1
expect_stderr "error: the copies of a replicated or tied tensor are not bit-equal: 'language_model.encoder.layers.1.input_layernorm.bias'"
expect_stderr "largest difference 0.5 at element 5"
expect_stderr "zero_pp_rank_[01]_mp_rank_01_optim_states.pt"
expect_no_file "$WORK/mismatch"
run_mpi 2 "$WORK/corpus/tp_replica_mismatch" "$WORK/mismatch" -q --tp-replicated first
expect_rc 0
cmp -s "$WORK/tp_own/model.safetensors" "$WORK/mismatch/model.safetensors" ||
    fail "--tp-replicated first did not take TP rank 0's copies"
# average: the mean of the two copies, (r0 + r1) / 2, where they differ (one element, by 0.5)
# and the copies themselves elsewhere: the files differ from TP rank 0's in one float only.
run_mpi 2 "$WORK/corpus/tp_replica_mismatch" "$WORK/averaged" -q --tp-replicated average
expect_rc 0
differing=$(cmp -l "$WORK/mismatch/model.safetensors" "$WORK/averaged/model.safetensors" | awk '{print $1}')
[[ -n $differing ]] || fail "--tp-replicated average wrote TP rank 0's copy"
element=$(( ($(head -1 <<<"$differing") - 1) / 4 * 4 ))
for byte in $differing; do
    (( (byte - 1) / 4 * 4 == element )) || fail "--tp-replicated average changed more than one element"
done
first_value=$(od -A n -t f4 -j "$element" -N 4 "$WORK/mismatch/model.safetensors")
mean_value=$(od -A n -t f4 -j "$element" -N 4 "$WORK/averaged/model.safetensors")
# (od prints 8 significant digits: the difference is 0.25 within them; a copy would give 0 or 0.5)
awk -v a="$first_value" -v m="$mean_value" 'BEGIN { d = m - a; if (d < 0) d = -d; exit !(d > 0.2499999 && d < 0.2500001) }' ||
    fail "the averaged element is $mean_value, TP rank 0's $first_value: not their mean"
run_mpi 1 "$WORK/corpus/tp_replica_mismatch" "$WORK/never" --tp-replicated mean
expect_rc 2
expect_stderr "--tp-replicated must be check, first or average"
expect_no_file "$WORK/never"

case_start "--strip-vocab-padding keeps original_vocab_size rows"
run_mpi 2 "$PARALLEL/tp2_dp2_z1_fp32" "$WORK/stripped" --strip-vocab-padding --dry-run
expect_rc 0
grep -q "word_embeddings.weight  *cat dim 0 over 2 TP ranks, vocabulary stripped to 50 rows" "$WORK/out.txt" ||
    fail "dry run does not show the stripped vocabulary"
run_mpi 2 "$PARALLEL/tp2_dp2_z1_fp32" "$WORK/stripped" -q --strip-vocab-padding --max-shard-size none
expect_rc 0
"$Z2F_INSPECT" "$WORK/stripped/model.safetensors" >"$WORK/inspect.txt" 2>&1 || fail "inspect"
grep -A3 "word_embeddings.weight" "$WORK/inspect.txt" | grep -q "50, 16" ||
    fail "the vocabulary is not 50 x 16: $(grep -A3 word_embeddings "$WORK/inspect.txt" | head -4)"
[[ $(stat -c %s "$WORK/stripped/model.safetensors") -lt $(stat -c %s "$WORK/tp_own/model.safetensors") ]] ||
    fail "the stripped output is not smaller"

case_start "without ZeRO files the model file's weights are converted, with a warning"
fixture_copy z2_ws2_fp32 "$WORK/zero0"
rm "$WORK"/zero0/global_step2/*_optim_states.pt
run_mpi 2 "$WORK/zero0" "$WORK/zero0_out"
expect_rc 0
expect_stderr "warning: .*no optimizer files and no optimizer state in the model files"
cmp -s "$WORK/zero0_out/model.safetensors" "$Z2F_FIXTURES/z2_ws2_fp32/ref/safetensors/model.safetensors" ||
    fail "the fp32 module weights differ from zero_to_fp32's output"

case_start "refused parallel layouts say what is missing"
for refused in "zero3_with_tp:mp_world_size is 1 but the tag folder holds the model files of 2" \
               "moe_with_tp:MoE expert files together with tensor parallelism" \
               "autoep_zero3:ds_autoep_layers is .*expected a list of AutoEP layer dicts"; do
    name=${refused%%:*}
    run_mpi 2 "$WORK/corpus/$name" "$WORK/refused_$name"
    expect_rc 1
    expect_stderr "${refused#*:}"
    expect_no_file "$WORK/refused_$name"
done


case_start "--io direct where O_DIRECT is refused (ramfs) or taken (tmpfs): the bytes of a disk"
# ramfs refuses O_DIRECT at open: the writer and the reader fall back to buffered I/O. Mounted
# in a private mount namespace (root only; ramfs reports no free space: --no-space-check). A torch zip (data descriptors, directory) sharded,
# and one file cut into 4 KiB blocks over three ranks, each compared with ext4's bytes.
run_single "$Z2F_FIXTURES/z3_ws2_tied_fp32" "$WORK/on_disk" --format torch --max-shard-size 3KB -q
expect_rc 0
run_mpi 3 "$Z2F_FIXTURES/z3_ws2_tied_fp32" "$WORK/on_disk_one" --max-shard-size none --block-size 4KiB -q
expect_rc 0
if [[ $(id -u) -eq 0 ]] && command -v unshare >/dev/null; then
    for fs in ramfs tmpfs; do
        mkdir -p "$WORK/mnt_$fs"
        # shellcheck disable=SC2086
        unshare -m bash -c "mount --make-rprivate / && mount -t $fs z2f-$fs '$WORK/mnt_$fs' &&
            '$Z2F_BIN' '$Z2F_FIXTURES/z3_ws2_tied_fp32' '$WORK/mnt_$fs/out' --format torch --max-shard-size 3KB --read-mode direct --no-space-check -q &&
            '$Z2F_MPIEXEC' -n 3 $Z2F_MPIEXEC_FLAGS '$Z2F_BIN' '$Z2F_FIXTURES/z3_ws2_tied_fp32' '$WORK/mnt_$fs/one' --max-shard-size none --block-size 4KiB --no-space-check -q &&
            cp -r '$WORK/mnt_$fs/out' '$WORK/from_$fs' && cp -r '$WORK/mnt_$fs/one' '$WORK/from_${fs}_one'" \
            >"$WORK/out.txt" 2>"$WORK/err.txt"
        RC=$?
        expect_rc 0
        diff -r "$WORK/on_disk" "$WORK/from_$fs" >/dev/null || fail "$fs output differs from the disk's"
        diff -r "$WORK/on_disk_one" "$WORK/from_${fs}_one" >/dev/null || fail "$fs shared file differs from the disk's"
    done
else
    echo "note: ramfs/tmpfs case skipped (needs root and unshare)"
fi

finish
