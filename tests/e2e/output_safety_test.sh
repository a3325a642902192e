#!/usr/bin/env bash
# Nothing lost, nothing silently wrong: --verify only reads and reports each file;
# --resume of a finished output writes nothing; path mistakes are usage errors that touch
# neither OUT_DIR nor CKPT_DIR; the summary is written for usage errors too, and a summary that
# cannot be written is an error. At 1 and 3 ranks where the ranks matter.
source "$(dirname "$0")/lib.sh"

# Everything a directory shows: names, sizes, modification times (ns) and inodes, recursively.
snapshot() { find "$1" -printf '%P %s %T@ %i %y\n' 2>/dev/null | sort; }
expect_unchanged() {
    local before=$1 dir=$2
    [[ "$(snapshot "$dir")" == "$before" ]] || fail "$dir changed: $(diff <(echo "$before") <(snapshot "$dir") | head -5)"
}
# run_n N ARGS...: N ranks under mpiexec, or for N = 1 the binary alone (no MPI at all, much
# quicker to start).
run_n() {
    local ranks=$1
    shift
    if [[ $ranks -eq 1 ]]; then run_single "$@"; else run_mpi "$ranks" "$@"; fi
}
json_field() { grep -o "\"$2\": [^,]*" "$1" | head -1 | sed 's/.*: //'; }

TIED="$Z2F_FIXTURES/z3_ws2_tied_fp32"
Z3="$Z2F_FIXTURES/z3_ws4_fp32"

for ranks in 1 3; do
    case_start "--verify of a torch output at $ranks rank(s) checks it as torch and writes nothing"
    out="$WORK/torch$ranks"
    run_single "$TIED" "$out" --format torch -q
    expect_rc 0
    before=$(snapshot "$out")
    run_n "$ranks" "$TIED" "$out" --verify
    expect_rc 0
    expect_stderr "pytorch_model.bin: intact"
    expect_unchanged "$before" "$out"
    expect_no_file "$out/model.safetensors"

    case_start "--verify of sharded bf16 output at $ranks rank(s): from the run record, not the defaults"
    out="$WORK/bf16$ranks"
    run_single "$Z3" "$out" --dtype bf16 --max-shard-size 4KB -q
    expect_rc 0
    before=$(snapshot "$out")
    run_n "$ranks" "$Z3" "$out" --verify --summary-json "$WORK/verify$ranks.json"
    expect_rc 0
    expect_stderr "model-00001-of-00002.safetensors: intact"
    expect_stderr "model.safetensors.index.json: intact"
    grep -q '"dtype": "bf16"' "$WORK/verify$ranks.json" || fail "the summary does not name the recorded dtype"
    grep -q '"check": "intact"' "$WORK/verify$ranks.json" || fail "the summary has no per-file check"
    expect_unchanged "$before" "$out"
done

case_start "--verify with an option that contradicts the record: usage error, nothing changed"
out="$WORK/bf163"
before=$(snapshot "$out")
for bad in "--dtype fp32" "--format torch" "--max-shard-size 5GB" "-t global_step1"; do
    # shellcheck disable=SC2086
    run_single "$Z3" "$out" --verify $bad
    expect_rc 2
done
expect_stderr "was converted from tag global_step2"
for bad in --overwrite --resume; do
    run_single "$Z3" "$out" --verify $bad
    expect_rc 2
    expect_stderr "never changes it"
done
run_single "$Z3" "$out" --verify --dtype bf16 -q
expect_rc 0
expect_unchanged "$before" "$out"

case_start "--verify reports each file: truncated, missing, differs; still writes nothing"
out="$WORK/damaged"
run_single "$Z3" "$out" --max-shard-size 4KB -q
expect_rc 0
truncate -s 1000 "$out/model-00001-of-00003.safetensors"
rm "$out/model-00003-of-00003.safetensors"
size=$(stat -c %s "$out/model-00002-of-00003.safetensors")
printf '\x55' | dd of="$out/model-00002-of-00003.safetensors" bs=1 seek=$((size - 3)) conv=notrunc status=none
before=$(snapshot "$out")
for ranks in 1 3; do
    run_n "$ranks" "$Z3" "$out" --verify --overwrite
    expect_rc 2
    run_n "$ranks" "$Z3" "$out" --verify
    expect_rc 1
    expect_stderr "model-00001-of-00003.safetensors: truncated: 1,000 of 7,956 bytes"
    expect_stderr "model-00002-of-00003.safetensors: differs: tensor '.*' differs from the checkpoint"
    expect_stderr "model-00003-of-00003.safetensors: missing (expected 992 bytes)"
    expect_stderr "model.safetensors.index.json: intact"
    expect_unchanged "$before" "$out"
done

case_start "--verify without a run record: checked as the command line says (and said so); without OUT_DIR: an error"
run_single "$TIED" "$WORK/norecord" -q --dtype bf16
expect_rc 0
rm "$WORK/norecord/.zero2fp32-run.json"
before=$(snapshot "$WORK/norecord")
run_single "$TIED" "$WORK/norecord" --verify
expect_rc 1
expect_stderr "holds no run record (.zero2fp32-run.json): verifying it as the command line describes it (--format safetensors, --dtype fp32"
expect_stderr "model.safetensors: "
run_mpi 2 "$TIED" "$WORK/norecord" --verify --dtype bfloat16
expect_rc 0
expect_stderr "verifying it as the command line describes it (--format safetensors, --dtype bf16"
expect_stderr "verify: every output byte matches the checkpoint"
expect_unchanged "$before" "$WORK/norecord"
# zero_to_fp32.py's own output (no record) against the checkpoint: equal with --parity only.
cp -r "$Z2F_FIXTURES/z2_ws2_frozen_bf16/ref/safetensors" "$WORK/zero_to_fp32_out"
run_mpi 2 "$Z2F_FIXTURES/z2_ws2_frozen_bf16" "$WORK/zero_to_fp32_out" --verify --parity
expect_rc 0
expect_stderr "model.safetensors: intact"
run_single "$Z2F_FIXTURES/z2_ws2_frozen_bf16" "$WORK/zero_to_fp32_out" --verify
expect_rc 1
expect_stderr "model.safetensors: truncated"
printf 'X' | dd of="$WORK/zero_to_fp32_out/model.safetensors" bs=1 seek=2000 conv=notrunc status=none
run_single "$Z2F_FIXTURES/z2_ws2_frozen_bf16" "$WORK/zero_to_fp32_out" --verify --parity
expect_rc 1
expect_stderr "model.safetensors: differs: tensor"
run_single "$TIED" "$WORK/nothing" --verify
expect_rc 1
expect_stderr "does not exist: nothing to verify"
expect_no_file "$WORK/nothing"

for ranks in 1 3; do
    case_start "--resume of a finished output at $ranks rank(s): nothing to do, 0 bytes written"
    out="$WORK/finished$ranks"
    fixture_copy z2_ws2_bf16 "$WORK/hfckpt$ranks"
    echo '{"model_type": "llama"}' >"$WORK/hfckpt$ranks/config.json"
    run_single "$WORK/hfckpt$ranks" "$out" --max-shard-size 2KB -q
    expect_rc 0
    expect_file "$out/.zero2fp32-run.json"
    before=$(snapshot "$out")
    run_n "$ranks" "$WORK/hfckpt$ranks" "$out" --max-shard-size 2KB --resume --summary-json "$WORK/resume$ranks.json"
    expect_rc 0
    expect_stderr "nothing to do"
    [[ $(json_field "$WORK/resume$ranks.json" bytes_written) == 0 ]] || fail "resume wrote $(json_field "$WORK/resume$ranks.json" bytes_written) bytes"
    expect_unchanged "$before" "$out"
done

case_start "--resume after a shard was damaged rewrites that shard only"
out="$WORK/finished1"
victim=$(ls "$out" | grep -m1 '^model-0000')
keep=$(ls "$out" | grep '^model-0000' | grep -v "$victim" | head -1)
inode=$(stat -c %i "$out/$keep")
truncate -s 10 "$out/$victim"
run_single "$WORK/hfckpt1" "$out" --max-shard-size 2KB --resume -q
expect_rc 0
[[ $(stat -c %i "$out/$keep") == "$inode" ]] || fail "$keep was rewritten"
run_single "$WORK/hfckpt1" "$out" --verify -q
expect_rc 0

case_start "path mistakes: exit 2 before anything is written, CKPT_DIR and OUT_DIR untouched"
fixture_copy z3_ws2_tied_fp32 "$WORK/ck"
ck_before=$(snapshot "$WORK/ck")
echo data >"$WORK/plain"
cd "$WORK" || exit 1
for target in "$WORK/ck" "$WORK/ck/" "$WORK/ck/global_step2" "$WORK/ck/global_step2/out" "$WORK/ck/../ck/hf" \
              "ck/sub" "$WORK/plain" "pytorch_model.bin" "$WORK/model.safetensors" "out.pt"; do
    ranks=1
    [[ $target == "$WORK/ck" || $target == pytorch_model.bin ]] && ranks=3
    run_n "$ranks" "$WORK/ck" "$target" --summary-json "$WORK/path.json"
    expect_rc 2
    [[ $(json_field "$WORK/path.json" exit_code) == 2 ]] || fail "$target: summary exit_code is not 2"
done
expect_stderr "looks like a file name, but OUT_DIR is a folder"
ln -s "$WORK/ck/global_step2" "$WORK/link_to_tag"
run_single "$WORK/ck" "$WORK/link_to_tag/out"
expect_rc 2
expect_stderr "inside the checkpoint folder"
# The checkpoint's root from its tag folder: only universal output goes there.
run_single "$WORK/ck/global_step2" "$WORK/ck" --summary-json "$WORK/path.json"
expect_rc 2
expect_stderr "is the checkpoint's root"
expect_unchanged "$ck_before" "$WORK/ck"
[[ $(cat "$WORK/plain") == data ]] || fail "the regular file OUT_DIR was changed"
expect_no_file "$WORK/pytorch_model.bin"
expect_no_file "$WORK/model.safetensors"
expect_no_file "$WORK/out.pt"
cd - >/dev/null || exit 1

case_start "zero_to_fp32's habit from inside the checkpoint: the suggested folder works"
fixture_copy z2_ws2_fp32 "$WORK/inside"
cd "$WORK/inside" || exit 1
run_single . pytorch_model.bin
expect_rc 2
suggested=$(grep -o "e.g. '[^']*'" "$WORK/err.txt" | sed "s/^e.g. '//; s/'$//")
[[ -n "$suggested" ]] || fail "no folder suggested: $(cat "$WORK/err.txt")"
run_single . "$suggested" --format torch -q
expect_rc 0
expect_file "$suggested/pytorch_model.bin"
cd - >/dev/null || exit 1

case_start "the summary is written for usage errors; an unwritable summary fails the run"
for bad in "--dtype fp8" "--max-shard-size 0" "--nonsense" "--tag="; do
    rm -f "$WORK/usage.json"
    # shellcheck disable=SC2086
    run_single "$TIED" "$WORK/never" $bad --summary-json "$WORK/usage.json"
    expect_rc 2
    expect_file "$WORK/usage.json"
    [[ $(json_field "$WORK/usage.json" exit_code) == 2 ]] || fail "'$bad': summary exit_code is not 2"
done
run_mpi 3 "$TIED" "$WORK/never" --dtype fp8 --summary-json "$WORK/usage3.json"
expect_rc 2
[[ $(json_field "$WORK/usage3.json" exit_code) == 2 ]] || fail "3 ranks: summary exit_code is not 2"
expect_no_file "$WORK/never"
run_mpi 3 "$TIED" "$WORK/sumfail" -q --summary-json "$WORK/no/such/dir/summary.json"
expect_rc 1
expect_stderr "cannot write the summary"

finish
