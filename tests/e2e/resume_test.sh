#!/usr/bin/env bash
# --resume trusts the run record and nothing else: it continues the run the record describes,
# with the record's options (a contradicting option is a usage error that shows the record's
# value), and refuses (exit 2, naming what differs, writing and removing nothing) a record of
# another checkpoint, other inputs or other options, an unreadable record, or outputs without
# any record. The converter's own leftover temp files (the run record's included) never block
# it. The last messages name the first few files, not thousands. At 1 and 2 ranks.
source "$(dirname "$0")/lib.sh"

snapshot() { find "$1" -printf '%P %s %T@ %i %y\n' 2>/dev/null | sort; }
expect_unchanged() {
    local before=$1 dir=$2
    [[ "$(snapshot "$dir")" == "$before" ]] || fail "$dir changed: $(diff <(echo "$before") <(snapshot "$dir") | head -5)"
}
expect_same_tree() {
    diff -r "$1" "$2" >/dev/null || fail "$2 is not $1: $(diff -rq "$1" "$2" | head -3)"
}
run_n() {
    local ranks=$1
    shift
    if [[ $ranks -eq 1 ]]; then run_single "$@"; else run_mpi "$ranks" "$@"; fi
}

Z3="$Z2F_FIXTURES/z3_ws4_fp32"
TIED="$Z2F_FIXTURES/z3_ws2_tied_fp32"

# References, written once: sharded bf16, and a universal checkpoint.
run_single "$Z3" "$WORK/ref_bf16" --max-shard-size 2KB --dtype bf16 -q
expect_rc 0
run_single "$Z3" "$WORK/ref_universal" --format universal -q
expect_rc 0

for ranks in 1 2; do
    case_start "another checkpoint's output, at $ranks rank(s): --resume refuses it (exit 2) and changes nothing"
    out="$WORK/other$ranks"
    run_single "$Z3" "$out" -q
    expect_rc 0
    before=$(snapshot "$out")
    run_n "$ranks" "$TIED" "$out" --resume
    expect_rc 2
    expect_stderr "holds the output of another run, which --resume does not replace"
    expect_stderr "checkpoint: '.*z3_ws4_fp32/global_step2' recorded, '.*z3_ws2_tied_fp32/global_step2' now"
    expect_unchanged "$before" "$out"
    # --overwrite is the way to replace it.
    run_n "$ranks" "$TIED" "$out" --overwrite -q
    expect_rc 0

    case_start "an interrupted bf16 run at $ranks rank(s): --resume alone continues it with the record's options"
    out="$WORK/bf16_$ranks"
    cp -r "$WORK/ref_bf16" "$out"
    rm "$out/model-00002-of-00003.safetensors" "$out/model.safetensors.index.json"
    before=$(snapshot "$out")
    run_n "$ranks" "$Z3" "$out" --resume --dtype fp32
    expect_rc 2
    expect_stderr "dtype fp32, but '$out' was written with bf16"
    expect_unchanged "$before" "$out"
    run_n "$ranks" "$Z3" "$out" --resume
    expect_rc 0
    expect_stderr "resume: 2 of 3 output file(s) are complete and kept"
    expect_same_tree "$WORK/ref_bf16" "$out"

    case_start "a universal output at $ranks rank(s): --resume without --format continues it as universal"
    out="$WORK/universal$ranks"
    cp -r "$WORK/ref_universal" "$out"
    rm -r "$out/global_step2_universal/zero/fc1.weight" "$out/latest_universal"
    run_n "$ranks" "$Z3" "$out" --resume
    expect_rc 0
    expect_no_file "$out/model.safetensors"
    expect_same_tree "$WORK/ref_universal" "$out"
done

case_start "leftover temp files of a failed run (the run record's too) do not block --resume"
out="$WORK/leftovers"
cp -r "$WORK/ref_bf16" "$out"
rm "$out/model-00001-of-00003.safetensors"
echo partial >"$out/.zero2fp32-run.json.tmp"
echo partial >"$out/model.safetensors.index.json.tmp"
echo partial >"$out/model-00001-of-00003.safetensors.tmp"
run_single "$Z3" "$out" --resume -q
expect_rc 0
expect_no_temp_files "$out"
expect_same_tree "$WORK/ref_bf16" "$out"
out="$WORK/leftovers_universal"
cp -r "$WORK/ref_universal" "$out"
rm "$out/latest_universal"
echo partial >"$out/global_step2_universal/.zero2fp32-run.json.tmp"
echo partial >"$out/latest_universal.tmp"
run_mpi 2 "$Z3" "$out" --resume -q
expect_rc 0
expect_no_temp_files "$out"
expect_same_tree "$WORK/ref_universal" "$out"

case_start "outputs without a run record, or with an unreadable one: --resume refuses, nothing changes"
out="$WORK/norecord"
run_single "$Z3" "$out" -q
expect_rc 0
rm "$out/.zero2fp32-run.json"
before=$(snapshot "$out")
run_single "$Z3" "$out" --resume
expect_rc 2
expect_stderr "but no run record"
expect_unchanged "$before" "$out"
echo '{"tool": "zero2fp32-mpi", "version": 1' >"$out/.zero2fp32-run.json"
before=$(snapshot "$out")
run_mpi 2 "$Z3" "$out" --resume
expect_rc 2
expect_stderr "is not a run record this version of zero2fp32-mpi can read"
expect_unchanged "$before" "$out"

case_start "an input that changed size since the record: refused, naming the input"
ckpt="$WORK/grown"
fixture_copy z3_ws4_fp32 "$ckpt"
run_single "$ckpt" "$WORK/grown_out" -q
expect_rc 0
printf 'x' >>"$ckpt/global_step2/zero_pp_rank_0_mp_rank_00_model_states.pt"
run_single "$ckpt" "$WORK/grown_out" --resume
expect_rc 2
expect_stderr "zero_pp_rank_0_mp_rank_00_model_states.pt': .* bytes recorded, .* now"

case_start "a resume that keeps many files says so in one line; -v lists them"
out="$WORK/many"
cp -r "$WORK/ref_universal" "$out"
rm "$out/global_step2_universal/zero/fc2.weight/fp32.pt"
run_single "$Z3" "$out" --resume
expect_rc 0
kept=$(grep -c "resume: " "$WORK/err.txt")
[[ $kept -eq 1 ]] || fail "$kept resume lines without -v"
expect_stderr "are complete and kept: .* and [0-9,]* more"
rm "$out/global_step2_universal/zero/fc2.weight/fp32.pt"
run_single "$Z3" "$out" --resume -v
expect_rc 0
files=$(find "$WORK/ref_universal/global_step2_universal" -name '*.pt' | wc -l)
listed=$(grep -c "resume: kept " "$WORK/err.txt")
[[ $listed -eq $((files - 1)) ]] || fail "-v lists $listed kept files of $((files - 1))"

finish
