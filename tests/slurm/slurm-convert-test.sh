#!/usr/bin/env bash
# slurm-convert-test.sh -- zero2fp32-mpi under a real (private, one-node) Slurm cluster:
#   1. `srun -n 4 zero2fp32-mpi` on a real fixture: safetensors byte-identical to zero_to_fp32's;
#   2. `sbatch --wait slurm/convert.sbatch` (srun inside): the sharded output and its index
#      byte-identical to zero_to_fp32's;
#   3. the time-limit path: a job signalled with SIGTERM (`scancel --signal=TERM`, what
#      --signal=TERM@180 does before the limit) stops with exit 3, requeues itself, and the
#      requeued run finishes with --resume; the result equals an uninterrupted conversion.
# Also runs the MPI end-to-end suite (tests/mpi) under `srun -n 4` and compares its outputs with
# those of `mpiexec -n 1` when they exist. Skips (exit 77) where Slurm cannot run: not installed,
# not root, or no cgroup file system for slurmd (start-cluster.sh). Expects Z2F_BIN, Z2F_SYNTH, Z2F_MPI_TESTS, Z2F_MPI_REFERENCE_OUTPUTS,
# Z2F_FIXTURES and Z2F_SOURCE_DIR from CTest.
set -uo pipefail

for bin in munged slurmctld slurmd srun sbatch scancel squeue; do
    command -v "$bin" >/dev/null || { echo "SKIP: $bin not installed (apt-get install slurm-wlm munge)"; exit 77; }
done
[[ $(id -u) -eq 0 ]] || { echo "SKIP: the private Slurm cluster needs root"; exit 77; }

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
work=$(mktemp -d "${TMPDIR:-/tmp}/z2f-slurm-convert.XXXXXX")
state=$work/cluster
failures=0
cleanup() {
    "$here/stop-cluster.sh" "$state" >/dev/null 2>&1
    if [[ $failures -eq 0 ]]; then rm -rf "$work"; else echo "kept $work (logs, outputs)"; fi
}
trap cleanup EXIT
fail() {
    echo "FAIL: $*"
    failures=$((failures + 1))
}

started=0
"$here/start-cluster.sh" "$state" >/dev/null || started=$?
if [[ $started -eq 77 ]]; then
    echo "SKIP: this machine cannot run slurmd (see above)"
    exit 77
fi
[[ $started -eq 0 ]] || { echo "FAIL: cluster did not start"; exit 1; }
# shellcheck source=/dev/null
. "$state/env.sh"
export Z2F_BIN
cd "$work" || exit 1

echo "--- srun -n 4"
timeout 120 srun -n 4 "$Z2F_BIN" "$Z2F_FIXTURES/z3_ws4_fp32" "$work/srun_out" --parity -q \
    >"$work/srun.log" 2>&1 || fail "srun -n 4 failed: $(cat "$work/srun.log")"
cmp -s "$work/srun_out/model.safetensors" "$Z2F_FIXTURES/z3_ws4_fp32/ref/safetensors/model.safetensors" \
    || fail "srun output differs from zero_to_fp32's"

echo "--- srun -n 4 of the MPI end-to-end suite (every fixture, format, backend)"
Z2F_MPI_OUTPUT_DIR="$work/mpi_srun" timeout 300 srun -n 4 "$Z2F_MPI_TESTS" >"$work/mpi_srun.log" 2>&1 \
    || fail "the MPI suite failed under srun -n 4: $(tail -20 "$work/mpi_srun.log")"
if [[ -d "$Z2F_MPI_REFERENCE_OUTPUTS" ]]; then
    diff -r -q -x .zero2fp32-run.json "$Z2F_MPI_REFERENCE_OUTPUTS" "$work/mpi_srun" >/dev/null \
        || fail "outputs under srun -n 4 differ from those of mpiexec -n 1"
fi

echo "--- sbatch slurm/convert.sbatch"
timeout 180 sbatch --wait --ntasks=4 "$Z2F_SOURCE_DIR/slurm/convert.sbatch" "$Z2F_FIXTURES/z3_ws4_fp32" \
    "$work/sbatch_out/" safetensors fp32 -- --max-shard-size 10KB --parity -q >"$work/sbatch.log" 2>&1 \
    || fail "sbatch convert.sbatch failed: $(cat "$work/sbatch.log" "$work"/zero2fp32-*.log 2>/dev/null)"
# The run record (.zero2fp32-run.json) is ours; every other file is zero_to_fp32's. OUT_DIR was
# given with a trailing slash: the summary is beside the folder, not in it.
grep -q '"status": "ok"' "$work/sbatch_out.summary.json" 2>/dev/null \
    || fail "no successful summary beside the output folder: $(ls -a "$work" "$work/sbatch_out")"
diff -r -x .zero2fp32-run.json "$work/sbatch_out" "$Z2F_FIXTURES/z3_ws4_fp32/ref/sharded_safetensors" >/dev/null \
    || fail "sbatch output differs from zero_to_fp32's sharded output"

echo "--- SIGTERM before the time limit: exit 3, requeue, --resume"
"$Z2F_SYNTH" --preset tiny --hidden 1024 --layers 4 --stage 3 --world-size 4 --no-moments -q "$work/ckpt" \
    || fail "cannot generate the checkpoint"
extra=(--buffer-size 64KiB --max-shard-size 8MB --progress never)
timeout 120 srun -n 2 "$Z2F_BIN" "$work/ckpt" "$work/reference" --dtype bf16 "${extra[@]}" -q >/dev/null 2>&1 \
    || fail "reference conversion failed"
job=$(sbatch --parsable --ntasks=4 "$Z2F_SOURCE_DIR/slurm/convert.sbatch" "$work/ckpt" "$work/requeued" \
    safetensors bf16 -- "${extra[@]}")
for _ in $(seq 1 3000); do
    compgen -G "$work/requeued/model-*-of-*.safetensors" >/dev/null && break
    sleep 0.01
done
scancel --signal=TERM "$job"
# The job requeues itself and runs again. Slurm delays a requeued job's start (a couple of
# minutes); once it is pending again, let it start now to keep the test short.
log=$work/zero2fp32-$job.log
hurried=0
pending_since=0
for _ in $(seq 1 600); do
    state_now=$(squeue -h -j "$job" -o %T 2>/dev/null)
    [[ -z "$state_now" ]] && break
    if [[ $state_now == PENDING ]] && grep -q "requeueing job" "$log" 2>/dev/null; then
        pending_since=$((pending_since + 1))
        # Give the cancelled step a few seconds to be cleaned up, then start the job.
        if [[ $hurried -eq 0 && $pending_since -ge 10 ]]; then
            scontrol update JobId="$job" StartTime=now >/dev/null 2>&1 && hurried=1
        fi
    fi
    sleep 0.5
done
grep -q "exited with 3" "$log" || fail "the signalled run did not exit 3: $(cat "$log")"
grep -q "requeueing job $job" "$log" || fail "the job did not requeue itself: $(cat "$log")"
grep -q "resuming: a run record" "$log" || fail "the requeued run did not resume: $(cat "$log")"
grep -q "exited with 0" "$log" || fail "the requeued run did not finish: $(cat "$log")"
diff -r "$work/reference" "$work/requeued" >/dev/null || fail "requeued output differs from an uninterrupted run"

if [[ $failures -eq 0 ]]; then echo "PASS"; exit 0; fi
exit 1
