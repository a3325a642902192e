#!/usr/bin/env bash
# stop-cluster.sh STATE_DIR -- stop the cluster that tests/slurm/start-cluster.sh STATE_DIR started.
#
# Nothing is ever killed by name. Only these processes are signalled:
#   * the pids recorded in STATE_DIR/run/{slurmd,slurmctld,munged}.pid, and only while
#     /proc/PID/comm is still that daemon and /proc/PID/cmdline names STATE_DIR (so a recycled
#     pid, a system munged or somebody else's slurmctld is never touched);
#   * slurmstepd processes of this cluster and the job processes below them. slurmd and
#     slurmctld deliberately leave running jobs alone when they get SIGTERM (jobs survive a
#     daemon restart on a real cluster), so a test that dies mid-job would otherwise leave its
#     ranks running. A slurmstepd is ours if it holds a file below STATE_DIR open (it inherits
#     slurmd's log file) or has its working directory there.
#
# Steps: scancel every job of the cluster while slurmctld is still up (give them up to 5 s to
# go), then slurmd, slurmctld, munged: SIGTERM, up to Z2F_SLURM_STOP_TIMEOUT seconds (default
# 10), then SIGKILL; then what is left of the jobs (only after a crashed or SIGKILLed
# slurmd): the process trees below our slurmstepds, then the slurmstepds, 2 s grace each.
#
# Idempotent: a missing STATE_DIR, missing pid files or already dead daemons are fine. Exit status
# 0 unless some process could not be killed. STATE_DIR itself is kept (logs stay readable).
set -uo pipefail

if [[ $# -ne 1 || -z "$1" ]]; then
    echo "usage: $0 STATE_DIR" >&2
    exit 2
fi
[[ -d $1 ]] || exit 0
state=$(cd "$1" && pwd -P)
timeout_s=${Z2F_SLURM_STOP_TIMEOUT:-10}

alive() {
    # alive PID: exists and is not a zombie (kill -0 succeeds on zombies, and pid 1 in a
    # container may take a while to reap orphans).
    local stat st
    { read -r stat <"/proc/$1/stat"; } 2>/dev/null || return 1
    st=${stat##*) }
    st=${st%% *}
    [[ -n $st && $st != Z ]]
}
ours() {
    # ours PID NAME: the process is NAME and its command line mentions STATE_DIR.
    local comm cmd
    comm=$(cat "/proc/$1/comm" 2>/dev/null) || return 1
    cmd=$(tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null) || return 1
    [[ $comm == "$2" && $cmd == *"$state/"* ]]
}
stop_pids() {
    # stop_pids SECONDS LABEL PID...: SIGTERM all, wait up to SECONDS, SIGKILL the survivors.
    local wait_s=$1 label=$2 pid i left
    shift 2
    [[ $# -gt 0 ]] || return 0
    kill -TERM "$@" 2>/dev/null
    for ((i = 0; i < wait_s * 10; i++)); do
        left=()
        for pid in "$@"; do alive "$pid" && left+=("$pid"); done
        [[ ${#left[@]} -eq 0 ]] && return 0
        sleep 0.1
    done
    echo "stop-cluster: $label (pid ${left[*]}) ignored SIGTERM for ${wait_s}s, sending SIGKILL" >&2
    kill -KILL "${left[@]}" 2>/dev/null
    for ((i = 0; i < 50; i++)); do
        local still=()
        for pid in "${left[@]}"; do alive "$pid" && still+=("$pid"); done
        [[ ${#still[@]} -eq 0 ]] && return 0
        sleep 0.1
    done
    echo "stop-cluster: $label (pid ${still[*]}) still alive after SIGKILL" >&2
    return 1
}
start_time() {
    # start_time PID: the process's start time (field 22 of /proc/PID/stat); with the pid it
    # identifies a process for good, even if the pid is later reused.
    local stat f
    { read -r stat <"/proc/$1/stat"; } 2>/dev/null || return 1
    read -ra f <<<"${stat##*) }"
    echo "${f[19]}"
}
recorded_pid() {
    # recorded_pid NAME: print the recorded pid of daemon NAME if it is alive and ours.
    local pidfile=$state/run/$1.pid pid
    [[ -s $pidfile ]] || return 1
    pid=$(<"$pidfile")
    [[ $pid =~ ^[0-9]+$ ]] && alive "$pid" && ours "$pid" "$1" && echo "$pid"
}
our_stepds() {
    local p pid comm
    for p in /proc/[0-9]*; do
        pid=${p#/proc/}
        # builtins only: this loop visits every process on the machine
        { read -r comm <"$p/comm"; } 2>/dev/null || continue
        [[ $comm == slurmstepd ]] || continue
        alive "$pid" || continue
        if [[ $(readlink "$p/cwd" 2>/dev/null) == "$state"/* ]] \
            || find "$p/fd" -mindepth 1 -maxdepth 1 -lname "$state/*" 2>/dev/null | grep -q .; then
            echo "$pid"
        fi
    done
}
descendants() {
    # descendants PID...: all processes below the given ones (from one ps snapshot).
    ps -eo pid=,ppid= 2>/dev/null | awk -v roots="$*" '
        { parent[$1] = $2; pids[NR] = $1 }
        END {
            n = split(roots, r, " "); for (i = 1; i <= n; i++) mark[r[i]] = 1
            do {
                changed = 0
                for (i in pids) { p = pids[i]
                    if (!(p in mark) && (parent[p] in mark)) { mark[p] = 2; changed = 1 } }
            } while (changed)
            for (p in mark) if (mark[p] == 2) print p
        }'
}

rc=0

# 1. Cancel the cluster's jobs while the daemons can still clean them up properly.
if recorded_pid slurmctld >/dev/null && [[ -f $state/slurm.conf ]]; then
    export SLURM_CONF=$state/slurm.conf
    jobs=$(timeout 10 squeue -h -o %i 2>/dev/null || true)
    if [[ -n $jobs ]]; then
        # shellcheck disable=SC2086
        timeout 10 scancel $jobs 2>/dev/null || true
        for ((i = 0; i < 50; i++)); do
            [[ -z $(timeout 5 squeue -h -t RUNNING,COMPLETING,PENDING,CONFIGURING -o %i 2>/dev/null) ]] && break
            sleep 0.1
        done
    fi
fi

# 2. Remember the steps of this cluster and their process trees (pid:start time) before slurmd
#    goes away; normally there are none left after step 1.
remember_tree() {
    local pid
    mapfile -t stepds < <(our_stepds)
    [[ ${#stepds[@]} -gt 0 ]] || return 0
    for pid in $(descendants "${stepds[@]}"); do
        tree+=("$pid:$(start_time "$pid")")
    done
}
tree=()
remember_tree

# 3. The daemons, in dependency order.
for d in slurmd slurmctld munged; do
    if pid=$(recorded_pid "$d"); then
        stop_pids "$timeout_s" "$d" "$pid" || rc=1
    fi
    pidfile=$state/run/$d.pid
    if [[ -s $pidfile ]]; then
        pid=$(<"$pidfile")
        { [[ $pid =~ ^[0-9]+$ ]] && alive "$pid" && ours "$pid" "$d"; } || rm -f "$pidfile"
    fi
done

# 4. Whatever is left of the jobs: processes that were or are below our slurmstepds (the same
#    process, by start time; never ourselves), then the slurmstepds themselves.
remember_tree
leftover=()
for entry in "${tree[@]}"; do
    pid=${entry%%:*}
    [[ $pid != "$$" && $pid != "$PPID" ]] || continue
    [[ " ${leftover[*]} " == *" $pid "* ]] && continue
    alive "$pid" && [[ $(start_time "$pid") == "${entry#*:}" ]] && leftover+=("$pid")
done
stop_pids 2 "job processes" "${leftover[@]}" || rc=1
mapfile -t stepds < <(our_stepds)
stop_pids 2 slurmstepd "${stepds[@]}" || rc=1

exit $rc
