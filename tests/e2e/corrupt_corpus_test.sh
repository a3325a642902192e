#!/usr/bin/env bash
# Every case of the corrupt-checkpoint corpus (tests/tools/make_corrupt_corpus.cpp), at 1 and 3
# ranks (Z2F_CORPUS_RANKS; the sanitizer build uses 1 only): a one-line error that names the
# file (or says what was expected), a non-zero exit that is not a signal, within 10 seconds, and
# an output directory left untouched (no index, no file).
source "$(dirname "$0")/lib.sh"

"$Z2F_CORPUS_TOOL" "$Z2F_FIXTURES" "$WORK/corpus" || { echo "cannot build the corpus"; exit 1; }
count=0
while IFS=$'\t' read -r name dir expect; do
    for ranks in ${Z2F_CORPUS_RANKS:-1 3}; do
        case_start "$name at $ranks rank(s)"
        out="$WORK/out_${name}_$ranks"
        start=$(date +%s%N)
        # shellcheck disable=SC2086
        timeout 60 "$Z2F_MPIEXEC" -n "$ranks" $Z2F_MPIEXEC_FLAGS "$Z2F_BIN" "$dir" "$out" --progress never \
            </dev/null >"$WORK/out.txt" 2>"$WORK/err.txt"
        RC=$?
        elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
        [[ $RC -ne 0 && $RC -lt 128 ]] || fail "exit code $RC (expected an error exit, not success or a signal)"
        [[ $elapsed_ms -le 10000 ]] || fail "took ${elapsed_ms} ms"
        line=$(grep -m1 "^zero2fp32-mpi: error: " "$WORK/err.txt")
        [[ -n "$line" ]] || { fail "no error line:"; sed 's/^/    /' "$WORK/err.txt" | head -5; }
        grep -q -F -- "$expect" "$WORK/err.txt" || { fail "error does not mention '$expect': $line"; }
        [[ ! -e "$out" ]] || fail "the output directory was created: $(ls -A "$out" | head -3)"
        count=$((count + 1))
    done
    echo "  $line" | cut -c1-200
done <"$WORK/corpus/cases.txt"
echo "$count runs"
finish
