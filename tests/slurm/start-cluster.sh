#!/usr/bin/env bash
# start-cluster.sh STATE_DIR -- start a private one-node Slurm cluster on this machine.
#
# Used by the test suite so that `srun -n 4 <mpi program>` and `sbatch <script>` run for real
# on a CI machine without systemd (Debian 12: slurm-wlm 22.05, munge 0.5, OpenMPI 4.1 + PMIx 4).
# Everything the cluster needs lives in STATE_DIR (any path; created if missing):
#
#   slurm.conf           generated configuration (settings explained below)
#   plugstack.conf       empty, so the system's SPANK plugins are not loaded
#   task-prolog.sh       TaskProlog, see OMPI_MCA_mpi_yield_when_idle below
#   env.sh               what a caller must source (also printed on stdout)
#   munge/               munge.key (generated once, 0400 root), PRNG seed, munged.log
#   run/                 munge socket; munged.pid, slurmctld.pid, slurmd.pid (what stop-cluster
#                        stops); stdout/stderr of the daemons' start-up
#   ctld/                slurmctld StateSaveLocation (wiped at every start: no stale jobs)
#   spool/               SlurmdSpoolDir (wiped at every start)
#   tmp/                 TmpFS (PMIx client directories)
#   log/                 slurmctld.log, slurmd.log (the previous start's logs are kept as *.old)
#
# As root it starts munged (its own key, socket, pid and log file: it never talks to or clashes
# with a system munged), slurmctld and slurmd (both with -f STATE_DIR/slurm.conf), then waits
# until `sinfo` reports the node idle (Z2F_SLURM_START_TIMEOUT seconds, default 30; it takes
# about 1 s). On failure it prints the reason and the tails of the daemons' logs, stops what it
# started and exits 1; on a machine that cannot run slurmd at all (no cgroup file system) it
# exits 77 before starting anything. It refuses to start a second cluster in a STATE_DIR whose daemons are
# still running. Afterwards:
#
#   . STATE_DIR/env.sh            # SLURM_CONF=STATE_DIR/slurm.conf, OMPI_MCA_mpi_yield_when_idle=1
#   srun -n 4 ./mpi_program       # --mpi=pmix is the default
#   sbatch --wait job.sh
#   tests/slurm/stop-cluster.sh STATE_DIR
#
# Without SLURM_CONF the clients look for /etc/slurm/slurm.conf (absent here) and then for DNS
# SRV records: "fetch_config: DNS SRV lookup failed ... Could not establish a configuration
# source". Jobs get SLURM_CONF from slurmstepd, so `srun` inside `sbatch` scripts just works.
#
# Concurrent clusters (different STATE_DIRs) do not clash: the TCP ports of slurmctld and slurmd
# are picked free at start-up, under a lock (/tmp/z2f-slurm-ports.lock) held until both daemons
# listen; FirstJobId is random, because PMIx namespaces and OpenMPI's session/shared-memory
# names are derived from the job id.
#
# OpenMPI under srun as root needs NO environment variable to work: direct launch through the
# PMIx plugin does not go through mpirun's root check, and PMIx 4.2 prints no gds/psec warnings.
# But the node is oversubscribed (4 ranks, 2 CPUs) and OpenMPI only learns that from mpirun, so
# directly launched ranks busy-poll and starve each other (20000 MPI_Allreduce on 4 ranks took
# 222 s, and over 100 s in a rerun, instead of 0.3-5 s). Hence OMPI_MCA_mpi_yield_when_idle=1,
# exported by env.sh and, for callers that only set SLURM_CONF, added to every task by the
# TaskProlog (unless already set).
# `mpirun` run as root inside a job would additionally need OMPI_ALLOW_RUN_AS_ROOT=1 and
# OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 (not exported: the project launches with srun).
# `srun --mpi=pmi2` does not work with Debian's OpenMPI (built without Slurm's PMI-2 library).
#
# Why each slurm.conf setting is there:
#   ClusterName=z2f<pid>    unique per cluster; only cosmetic without accounting.
#   SlurmctldHost=H(127.0.0.1)
#                           H must be `hostname -s` (slurmctld refuses to run on a host not named
#                           there); the explicit address means daemons and clients do not need
#                           H to resolve (no DNS here; /etc/hosts maps it, but CI may not).
#   SlurmUser=root, SlurmdUser=root
#                           everything runs as root: no `slurm` user or chown of state dirs needed.
#   SlurmctldPort, SlurmdPort
#                           free ports picked at start (6817/6818 may belong to a system cluster
#                           or to a concurrent run).
#   AuthType=auth/munge, CredType=cred/munge, AuthInfo=socket=STATE_DIR/run/munge.sock
#                           munge through OUR munged; AuthInfo is honoured by both plugins and by
#                           every client that reads SLURM_CONF.
#   StateSaveLocation, SlurmdSpoolDir, SlurmctldPidFile, SlurmdPidFile, SlurmctldLogFile,
#   SlurmdLogFile, TmpFS    all private: nothing under /var/spool, /var/log, /run is needed.
#   PlugStackConfig         an empty private file (keeps /etc/slurm/plugstack.conf out).
#   TaskProlog              exports OMPI_MCA_mpi_yield_when_idle=1 into tasks (see above).
#   ProctrackType=proctrack/linuxproc
#                           no cgroups (no systemd; cgroup v1/v2 mixed mode in a VM), so no
#                           cgroup.conf; linuxproc tracks job processes through /proc.
#   TaskPlugin=task/none    no cgroup or affinity binding (4 ranks share 2 CPUs anyway).
#   JobAcctGatherType, AccountingStorageType, JobCompType = none
#                           no slurmdbd or accounting to run.
#   MpiDefault=pmix         Debian's OpenMPI 4.1 is built with PMIx; `srun --mpi=list` shows pmix
#                           (pmix_v4). Plain `srun` then direct-launches MPI programs.
#   SwitchType=switch/none  no interconnect plugin.
#   SchedulerType=sched/builtin
#                           plain FIFO; no backfill pass needed on one node.
#   SelectType=select/cons_tres, SelectTypeParameters=CR_CPU
#                           allocate individual CPUs; memory is not a consumable resource, so
#                           jobs without --mem never wait for memory.
#   NodeName=H NodeAddr=127.0.0.1 CPUs=N
#                           N = max(8, real CPUs) unless Z2F_SLURM_CPUS says otherwise. With the
#                           real count (2) `srun -n 4` is never scheduled ("Requested partition
#                           configuration not available now", pending forever) unless every
#                           caller adds --overcommit; OverSubscribe does not help, it only lets
#                           different jobs share CPUs.
#   SlurmdParameters=config_overrides
#                           slurmd reports the configured CPUs/memory instead of the detected
#                           ones; without it the over-declared node is set INVAL/DRAIN ("Low
#                           socket*core*thread count, Low CPUs").
#   RealMemory              what `slurmd -C` detects (more would also make the node INVAL without
#                           config_overrides; the default of 1 MB would reject any --mem job).
#   PartitionName=debug ... OverSubscribe=FORCE:4
#                           several jobs (ctest -j) can share the node's CPUs at the same time.
#   EnforcePartLimits=ALL   a request the node can never satisfy (e.g. `srun -n 9` on 8 CPUs)
#                           fails at once ("More processors requested than permitted") instead
#                           of pending forever ("Requested partition configuration not available
#                           now"), which would hang a test.
#   ReturnToService=2       a node that was DOWN (slurmd restarted or late to answer) becomes
#                           usable again as soon as it registers with a valid configuration.
#   MessageTimeout=10, SlurmdTimeout=60, KillWait=5, InactiveLimit=0
#                           short timeouts so failures and job clean-up are quick in tests.
#   MinJobAge=5             keeps `sbatch --wait` polling every 2 s: sbatch sleeps 2 s, then
#                           multiplies its interval by 4 (2, 8, 32 s) while it is below
#                           MinJobAge/2. With the default (300) a 3 s job returns after 10 s
#                           and a 12 s job after 42 s. It must stay above 2 s, or sbatch may
#                           find the job already purged ("Job no longer found", exit 1); 22.05
#                           also raises 0 or 1 to 2 with an error, the man page's "0 = never
#                           purge" does not hold here. Finished jobs stay visible for >= 5 s.
#   MailProg=/bin/true      no mail program on CI machines.
#   FirstJobId=<random>     see above.
#
# Environment knobs:
#   Z2F_SLURM_CPUS           CPUs declared for the node (default: max(8, real CPU count)).
#   Z2F_SLURM_START_TIMEOUT  seconds to wait for the node to become idle (default 30).
set -euo pipefail

if [[ $# -ne 1 || -z "$1" ]]; then
    echo "usage: $0 STATE_DIR" >&2
    exit 2
fi

for bin in munged slurmctld slurmd sinfo scontrol; do
    command -v "$bin" >/dev/null || { echo "start-cluster: '$bin' not found (apt-get install slurm-wlm munge)" >&2; exit 1; }
done
if [[ $(id -u) -ne 0 ]]; then
    echo "start-cluster: must run as root (slurmd has to be able to start jobs as any user)" >&2
    exit 1
fi

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
# slurmd 22.05 initialises its cgroup plugin at start-up even with proctrack/linuxproc and
# task/none, and exits when no cgroup file system is mounted (containers, some chroots). That is
# the machine, not the project: say so and exit 77, which the tests pass on as CTest's skip.
# Z2F_CGROUP_MOUNTS (default /proc/mounts) lets a test check this path.
mounts=${Z2F_CGROUP_MOUNTS:-/proc/mounts}
if ! awk '$3 == "cgroup" || $3 == "cgroup2" {found = 1} END {exit !found}' "$mounts" 2>/dev/null; then
    echo "start-cluster: SKIP: no cgroup file system is mounted ($mounts lists no cgroup or cgroup2), and slurmd cannot start without one" >&2
    exit 77
fi
if [[ $1 =~ [[:space:]\#=] ]]; then
    echo "start-cluster: STATE_DIR '$1' must not contain blanks, '#' or '=' (slurm.conf syntax)" >&2
    exit 1
fi
mkdir -p "$1"
state=$(cd "$1" && pwd -P)
if [[ $state =~ [[:space:]\#=] ]]; then
    echo "start-cluster: STATE_DIR '$state' must not contain blanks, '#' or '=' (slurm.conf syntax)" >&2
    exit 1
fi
# This script chmods STATE_DIR and wipes sub-directories in it: only accept an empty directory
# or one a previous start-cluster.sh has marked.
if [[ ! -e $state/.z2f-slurm-state && -n $(ls -A "$state") ]]; then
    echo "start-cluster: $state is not empty and not a cluster state dir; use a new or empty directory" >&2
    exit 1
fi
touch "$state/.z2f-slurm-state"
timeout_s=${Z2F_SLURM_START_TIMEOUT:-30}
exec {errfd}>&2

# Refuse to start twice in the same STATE_DIR (stop-cluster.sh first).
for d in munged slurmctld slurmd; do
    pidfile=$state/run/$d.pid
    if [[ -s $pidfile ]]; then
        pid=$(<"$pidfile")
        if [[ $pid =~ ^[0-9]+$ ]] && [[ $(cat "/proc/$pid/comm" 2>/dev/null) == "$d" ]] \
            && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$state/"; then
            echo "start-cluster: $d (pid $pid) of a cluster in $state is still running; run stop-cluster.sh $state first" >&2
            exit 1
        fi
    fi
done

# --- directories ----------------------------------------------------------------------------
# munged insists that every directory above its socket is executable by everybody (it would
# otherwise refuse to start). STATE_DIR is often a 0700 mktemp dir, so open it to o+x (not o+r).
chmod 0711 "$state"
rm -rf "$state/ctld" "$state/spool" "$state/run" "$state/tmp"
mkdir -p "$state/munge" "$state/run" "$state/ctld" "$state/spool" "$state/tmp" "$state/log"
chmod 0700 "$state/munge" "$state/ctld"
chmod 0755 "$state/run" "$state/spool" "$state/log"
chmod 1777 "$state/tmp"
for f in slurmctld.log slurmd.log; do
    [[ -f $state/log/$f ]] && mv -f "$state/log/$f" "$state/log/$f.old"
done
[[ -f $state/munge/munged.log ]] && mv -f "$state/munge/munged.log" "$state/munge/munged.log.old"

# --- munge key ------------------------------------------------------------------------------
key=$state/munge/munge.key
if [[ ! -s $key ]]; then
    # 128 random bytes (1024 bits, mungekey's default), owned by root: munged runs as root.
    umask 077
    head -c 128 /dev/urandom >"$key.tmp"
    mv -f "$key.tmp" "$key"
    umask 022
fi
chown root:root "$key"
chmod 0400 "$key"

# --- node description -----------------------------------------------------------------------
host=$(hostname -s)
real_cpus=$(nproc --all)
# e.g. "NodeName=vm CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1 RealMemory=24105"
node_line=$(slurmd -C 2>/dev/null | head -n1 || true)
real_mem=$(sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p' <<<"$node_line")
[[ $real_mem =~ ^[0-9]+$ ]] || real_mem=$(awk '/^MemTotal:/ {print int($2/1024)}' /proc/meminfo)
cpus=${Z2F_SLURM_CPUS:-$((real_cpus > 8 ? real_cpus : 8))}

# --- ports ----------------------------------------------------------------------------------
tcp_port_state() {
    # tcp_port_state PORT [STATE]: some TCP socket (IPv4/6, any address) has local port PORT
    # (and kernel state STATE, e.g. 0A = LISTEN). Reads /proc/net/tcp*: no need for ss/netstat.
    local hex
    hex=$(printf ':%04X' "$1")
    awk -v h="$hex" -v s="${2:-}" \
        'FNR > 1 && substr($2, length($2) - 4) == h && (s == "" || $4 == s) {f = 1} END {exit !f}' \
        /proc/net/tcp /proc/net/tcp6 2>/dev/null
}
port_in_use() { tcp_port_state "$1"; }
pick_port() {
    # pick_port [EXCLUDED]: a free port in 20000-31999, below the ephemeral range (32768-60999
    # on Linux) so that outgoing connections do not grab it before our daemon binds it.
    local p tries=0
    while ((tries++ < 200)); do
        p=$((20000 + (RANDOM % 12000)))
        [[ $p == "${1:-}" ]] && continue
        port_in_use "$p" && continue
        echo "$p"
        return 0
    done
    echo "start-cluster: no free TCP port found" >&2
    return 1
}

# --- failure handling ----------------------------------------------------------------------
show_logs() {
    local f
    for f in "$state/munge/munged.log" "$state/run/munged.out" "$state/log/slurmctld.log" \
        "$state/log/slurmd.log" "$state/run/slurmctld.out" "$state/run/slurmd.out"; do
        [[ -s $f ]] || continue
        echo "----- tail of $f" >&2
        tail -n 25 "$f" >&2
    done
}
fail() {
    # Writes to the saved stderr: fail may run inside wait_for, whose probes are silenced.
    {
        echo "start-cluster: ERROR: $*"
        show_logs 2>&1
        "$here/stop-cluster.sh" "$state" 2>&1 || true
    } >&"$errfd"
    exit 1
}
wait_for() {
    # wait_for SECONDS DESCRIPTION COMMAND...: poll COMMAND every 0.2 s.
    local limit=$1 what=$2 start=$SECONDS
    shift 2
    until "$@" >/dev/null 2>&1; do
        ((SECONDS - start < limit)) || fail "timed out after ${limit}s waiting for $what"
        sleep 0.2
    done
}
pid_alive() {
    local pid
    pid=$(cat "$1" 2>/dev/null) || return 1
    [[ $pid =~ ^[0-9]+$ ]] || return 1
    # A zombie (state Z) is dead even though kill -0 succeeds.
    local stat st
    { read -r stat <"/proc/$pid/stat"; } 2>/dev/null || return 1
    st=${stat##*) }
    st=${st%% *}
    [[ -n $st && $st != Z ]]
}

daemon_up() {
    # daemon_up NAME COMMAND...: fail at once if daemon NAME has died (fatal error in its
    # start-up output, or its recorded pid gone), else succeed when COMMAND does and the pid
    # file is written.
    local name=$1
    shift
    grep -q 'fatal' "$state/run/$name.out" 2>/dev/null && fail "$name failed to start"
    if [[ -s $state/run/$name.pid ]]; then
        pid_alive "$state/run/$name.pid" || fail "$name exited during start-up"
    else
        return 1
    fi
    "$@"
}

t0=$(date +%s.%N)
# The daemons must not inherit our stdout/stderr (a caller reading them through a pipe, e.g.
# `out=$(start-cluster.sh DIR)` or CTest, would wait for EOF until the daemons exit), nor the
# saved stderr or the port lock: each is started with those redirected or closed.

# --- munged ---------------------------------------------------------------------------------
sock=$state/run/munge.sock
# --force: tolerate a STATE_DIR below a non-world-executable directory (e.g. /root); clients
# of this cluster run as root anyway.
munged --force --origin=127.0.0.1 \
    --key-file="$key" --socket="$sock" --pid-file="$state/run/munged.pid" \
    --log-file="$state/munge/munged.log" --seed-file="$state/munge/munged.seed" \
    </dev/null >"$state/run/munged.out" 2>&1 {errfd}>&- \
    || fail "munged did not start"
wait_for 10 "munged socket" bash -c "munge -S '$sock' -n | unmunge -S '$sock'"

# Port selection and daemon start-up happen under a lock so that concurrent start-ups cannot
# pick the same ports; the lock is released once both daemons are listening.
lock=/tmp/z2f-slurm-ports.lock
exec {lockfd}>>"$lock"
flock -w 60 "$lockfd" || fail "could not lock $lock"
ctld_port=$(pick_port) || fail "no free port"
slurmd_port=$(pick_port "$ctld_port") || fail "no free port"
first_job_id=$((1000 + (RANDOM * 32768 + RANDOM) % 60000000))

# --- configuration --------------------------------------------------------------------------
: >"$state/plugstack.conf"
# Runs before every task; its "export X=Y" lines land in the task environment. Oversubscribed
# OpenMPI ranks must yield instead of busy-polling (see the notes at the top).
cat >"$state/task-prolog.sh" <<'EOF'
#!/bin/sh
# Generated by tests/slurm/start-cluster.sh (TaskProlog). Keeps an explicit caller setting.
[ -n "${OMPI_MCA_mpi_yield_when_idle:-}" ] || echo "export OMPI_MCA_mpi_yield_when_idle=1"
EOF
chmod 0755 "$state/task-prolog.sh"
cat >"$state/slurm.conf" <<EOF
# Generated by tests/slurm/start-cluster.sh -- see the notes at the top of that script.
ClusterName=z2f$$
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$sock
StateSaveLocation=$state/ctld
SlurmdSpoolDir=$state/spool
SlurmctldPidFile=$state/run/slurmctld.pid
SlurmdPidFile=$state/run/slurmd.pid
SlurmctldLogFile=$state/log/slurmctld.log
SlurmdLogFile=$state/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
TmpFS=$state/tmp
PlugStackConfig=$state/plugstack.conf
TaskProlog=$state/task-prolog.sh
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=pmix
SwitchType=switch/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
EnforcePartLimits=ALL
MessageTimeout=10
SlurmdTimeout=60
KillWait=5
InactiveLimit=0
MinJobAge=5
MailProg=/bin/true
FirstJobId=$first_job_id
NodeName=$host NodeAddr=127.0.0.1 NodeHostname=$host CPUs=$cpus RealMemory=$real_mem State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
EOF
export SLURM_CONF=$state/slurm.conf

# --- slurmctld ------------------------------------------------------------------------------
# -i: ignore (nonexistent) saved state; we start from a clean StateSaveLocation anyway.
slurmctld -f "$SLURM_CONF" -i </dev/null >"$state/run/slurmctld.out" 2>&1 {lockfd}>&- {errfd}>&- || fail "slurmctld did not start"
wait_for 15 "slurmctld to answer" daemon_up slurmctld bash -c 'scontrol ping | grep -q "is UP"'

# --- slurmd ---------------------------------------------------------------------------------
slurmd -f "$SLURM_CONF" -N "$host" </dev/null >"$state/run/slurmd.out" 2>&1 {lockfd}>&- {errfd}>&- || fail "slurmd did not start"
wait_for 15 "slurmd to listen on port $slurmd_port" daemon_up slurmd tcp_port_state "$slurmd_port" 0A
flock -u "$lockfd"
exec {lockfd}>&-

# --- wait for the node --------------------------------------------------------------------
node_idle() {
    pid_alive "$state/run/slurmctld.pid" || fail "slurmctld exited"
    pid_alive "$state/run/slurmd.pid" || fail "slurmd exited"
    local st
    st=$(sinfo -h -N -n "$host" -o %T 2>/dev/null) || return 1
    [[ $st == idle ]]
}
start=$SECONDS
until node_idle; do
    if ((SECONDS - start >= timeout_s)); then
        echo "start-cluster: node state: $(sinfo -h -N -o '%N %T %E' 2>&1)" >&2
        fail "node $host not idle after ${timeout_s}s"
    fi
    sleep 0.2
done
t1=$(date +%s.%N)

# --- environment for callers ----------------------------------------------------------------
cat >"$state/env.sh" <<EOF
# Generated by tests/slurm/start-cluster.sh: source this to use the cluster in $state.
export SLURM_CONF=$state/slurm.conf
# 4+ ranks share fewer real CPUs: without this, OpenMPI ranks busy-poll and steal each other's
# CPU (20000 MPI_Allreduce: 222 s instead of 0.3-5 s). Also set per task by the TaskProlog.
export OMPI_MCA_mpi_yield_when_idle=1
# srun direct launch as root needs nothing else. Only 'mpirun' run as root (e.g. inside an
# sbatch job) would also need: OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
EOF
cat "$state/env.sh"
printf 'start-cluster: node %s idle after %.1f s (slurmctld :%s, slurmd :%s, pids %s/%s/%s)\n' \
    "$host" "$(awk -v a="$t0" -v b="$t1" 'BEGIN {print b - a}')" "$ctld_port" "$slurmd_port" \
    "$(<"$state/run/munged.pid")" "$(<"$state/run/slurmctld.pid")" "$(<"$state/run/slurmd.pid")" >&2
