#!/usr/bin/env bash
# slurm-smoke-test.sh -- end-to-end check of the private one-node Slurm cluster (CTest-ready).
#
# 1. Skips (exit 77, CTest's SKIP_RETURN_CODE) when munged/slurmctld/slurmd, srun/sbatch or
#    mpicc are not installed, or when not run as root (slurmd must run as root).
# 2. Starts a cluster with tests/slurm/start-cluster.sh in DIR/cluster, DIR being a fresh
#    $TMPDIR/z2f-slurm-smoke.XXXXXX; an EXIT trap always stops it with stop-cluster.sh (also on
#    failure, Ctrl-C, SIGTERM) and removes DIR (kept, with the logs, on failure or when
#    Z2F_KEEP_SLURM_STATE=1). Clusters of earlier runs that were SIGKILLed (CTest timeout) are
#    stopped first, recognised by DIR/owner.pid naming a dead process.
# 3. Compiles a tiny C MPI program with mpicc in that directory and runs it with
#    `srun -n 4 --mpi=pmix`: all 4 ranks must report MPI_COMM_WORLD size 4 and an MPI_Allreduce
#    must agree (proves PMIx wire-up and shared-memory transport, not just 4 singletons).
# 4. Runs `sbatch --wait` on a batch script that itself calls `srun` (the way the project is used
#    on real clusters) and checks its output file and exit status.
# srun and sbatch run under `timeout` (start-cluster.sh has its own), so a broken cluster fails in
# seconds instead of hanging the test suite. The whole test takes 6-12 s (2-core VM, under load).
set -euo pipefail

for bin in munged slurmctld slurmd; do
    if ! command -v "$bin" >/dev/null; then
        echo "SKIP: slurm not installed ($bin missing; apt-get install slurm-wlm munge)"
        exit 77
    fi
done
for bin in srun sbatch sinfo mpicc; do
    if ! command -v "$bin" >/dev/null; then
        echo "SKIP: $bin not installed"
        exit 77
    fi
done
if [[ $(id -u) -ne 0 ]]; then
    echo "SKIP: the private Slurm cluster needs root (slurmd runs jobs as their owner)"
    exit 77
fi

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
tmp=${TMPDIR:-/tmp}

# A smoke test killed with SIGKILL (e.g. by a CTest timeout) cannot run its EXIT trap and leaves
# its daemons running. Stop those of earlier runs whose owner is gone (never those of a run still
# in progress); their directories stay, with the logs.
for old in "$tmp"/z2f-slurm-smoke.*; do
    [[ -d $old/cluster && -s $old/owner.pid ]] || continue
    owner=$(<"$old/owner.pid")
    if [[ ! $owner =~ ^[0-9]+$ ]] || kill -0 "$owner" 2>/dev/null; then
        continue
    fi
    "$here/stop-cluster.sh" "$old/cluster" || true
    rm -f "$old/owner.pid"
done

work=$(mktemp -d "$tmp/z2f-slurm-smoke.XXXXXX") # test files; the cluster lives in $work/cluster
state=$work/cluster
echo $$ >"$work/owner.pid"
ok=0
cleanup() {
    local rc=$?
    "$here/stop-cluster.sh" "$state" || rc=1
    rm -f "$work/owner.pid"
    if [[ $ok -eq 1 && $rc -eq 0 && ${Z2F_KEEP_SLURM_STATE:-0} != 1 ]]; then
        rm -rf "$work"
    else
        echo "slurm-smoke-test: test files, cluster state and logs kept in $work" >&2
    fi
    exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

die() {
    echo "slurm-smoke-test: FAIL: $*" >&2
    local f
    for f in "$state/log/slurmctld.log" "$state/log/slurmd.log"; do
        [[ -s $f ]] && { echo "----- tail of $f" >&2; tail -n 20 "$f" >&2; }
    done
    exit 1
}

t0=$SECONDS
started=0
"$here/start-cluster.sh" "$state" >/dev/null || started=$?
if [[ $started -eq 77 ]]; then
    echo "SKIP: this machine cannot run slurmd (see above)"
    exit 77
fi
[[ $started -eq 0 ]] || die "the cluster did not start"
# shellcheck source=/dev/null
. "$state/env.sh"
echo "cluster up after $((SECONDS - t0)) s: $(sinfo -h -N -o '%N %T cpus=%c')"

# --- MPI hello world through srun ---------------------------------------------------------
cat >"$work/hello.c" <<'EOF'
#include <mpi.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int rank = -1, size = -1, sum = -1;
    char host[256] = "";
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    gethostname(host, sizeof host - 1);
    printf("rank %d size %d sum %d host %s\n", rank, size, sum, host);
    MPI_Finalize();
    return 0;
}
EOF
mpicc -O1 -o "$work/hello" "$work/hello.c" || die "mpicc failed"

check_ranks() {
    # check_ranks FILE LABEL: exactly ranks 0..3, each with size 4 and allreduce sum 0+1+2+3.
    local file=$1 label=$2 r
    for r in 0 1 2 3; do
        [[ $(grep -c "^rank $r size 4 sum 6 " "$file") -eq 1 ]] \
            || die "$label: rank $r missing or wrong:"$'\n'"$(cat "$file")"
    done
    [[ $(grep -c '^rank ' "$file") -eq 4 ]] || die "$label: expected 4 rank lines:"$'\n'"$(cat "$file")"
}

t1=$SECONDS
timeout 30 srun -n 4 --mpi=pmix "$work/hello" >"$work/srun.out" 2>"$work/srun.err" \
    || die "srun -n 4 failed (rc $?):"$'\n'"$(cat "$work/srun.out" "$work/srun.err")"
check_ranks "$work/srun.out" "srun -n 4"
if [[ -s $work/srun.err ]]; then
    echo "note: srun stderr was not empty:" >&2
    cat "$work/srun.err" >&2
fi
echo "srun -n 4 --mpi=pmix: 4 ranks, MPI_COMM_WORLD size 4 ($((SECONDS - t1)) s)"

# --- batch job that calls srun -------------------------------------------------------------
cat >"$work/job.sh" <<EOF
#!/bin/bash
#SBATCH --job-name=z2f-smoke
#SBATCH --ntasks=4
#SBATCH --time=1
#SBATCH --output=$work/job.out
set -e
echo "batch on \$(hostname -s) job \$SLURM_JOB_ID ntasks \$SLURM_NTASKS"
srun "$work/hello"
echo "batch done"
EOF
t1=$SECONDS
timeout 45 sbatch --wait "$work/job.sh" >"$work/sbatch.out" 2>&1 \
    || die "sbatch --wait failed (rc $?):"$'\n'"$(cat "$work/sbatch.out" "$work/job.out" 2>/dev/null)"
[[ -s $work/job.out ]] || die "batch job wrote no output"
grep -q '^batch on .* ntasks 4$' "$work/job.out" || die "batch header missing:"$'\n'"$(cat "$work/job.out")"
grep -q '^batch done$' "$work/job.out" || die "batch job did not finish:"$'\n'"$(cat "$work/job.out")"
grep '^rank ' "$work/job.out" >"$work/job.ranks" || true
check_ranks "$work/job.ranks" "sbatch + srun"
echo "sbatch --wait (srun inside): 4 ranks, MPI_COMM_WORLD size 4 ($((SECONDS - t1)) s)"

ok=1
echo "PASS: slurm smoke test ($((SECONDS - t0)) s)"
