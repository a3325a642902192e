#!/usr/bin/env bash
# The Slurm tests on a machine whose slurmd cannot start for want of a cgroup file system: they
# must skip (exit 77) and say why, not fail. Simulated with a mounts table that lists no cgroup
# (start-cluster.sh reads Z2F_CGROUP_MOUNTS instead of /proc/mounts); skips itself where the
# Slurm tests would skip for another reason (Slurm not installed, not root).
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
for bin in munged slurmctld slurmd srun sbatch sinfo mpicc; do
    command -v "$bin" >/dev/null || { echo "SKIP: $bin not installed"; exit 77; }
done
[[ $(id -u) -eq 0 ]] || { echo "SKIP: the Slurm tests need root"; exit 77; }

work=$(mktemp -d "${TMPDIR:-/tmp}/z2f-no-cgroup.XXXXXX")
trap 'rm -rf "$work"' EXIT
printf 'proc /proc proc rw 0 0\nsysfs /sys sysfs rw 0 0\n' >"$work/mounts"
failures=0
for test in slurm-smoke-test.sh slurm-convert-test.sh; do
    TMPDIR=$work Z2F_CGROUP_MOUNTS=$work/mounts "$here/$test" >"$work/out.txt" 2>&1
    rc=$?
    if [[ $rc -ne 77 ]] || ! grep -q "no cgroup file system" "$work/out.txt"; then
        echo "FAIL: $test exited $rc without saying why it cannot run:"
        sed 's/^/    /' "$work/out.txt" | tail -10
        failures=$((failures + 1))
    fi
done
[[ $failures -eq 0 ]] && echo "PASS: both Slurm tests skip with the reason"
exit $((failures > 0))
