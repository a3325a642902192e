#!/usr/bin/env bash
# The direct-I/O engine against the device's limits, on the file system of --work.
#
#   bench/io_engine.sh [--work DIR] [--rounds N] [--small BYTES] [--large BYTES] [--quick]
#                      [--fio-hugepages]
#
# --fio-hugepages (root) adds fio with its buffers in huge pages (--iomem=shmhuge), the fair
# limit for a writer whose blocks are in huge pages: it reserves 40 hugetlb pages (80 MiB) in
# /proc/sys/vm/nr_hugepages for the run and puts the old value back at exit.
#
# In interleaved rounds (every contender once per round, so drift of a noisy machine hits all
# of them alike), every sample printed:
#   write, --small bytes (805,948,632: the fp32 output of the 201m bench model):
#     fio (direct, io_uring, 16 x 4 MiB in flight, end_fsync), dd (16 MiB, oflag=direct,
#     conv=fsync), and io_engine_bench write for each engine (io_uring, threads) x block size
#     (1/4/8/16 MiB) x blocks in flight (2/4/8) within a 64 MiB budget; plus the default
#     configuration without fallocate, without huge pages, and in buffered (fallback) mode;
#   write, --large bytes (6,000,000,000): fio, dd and a few io_engine_bench configurations;
#   read of the --small file, cold (sync; echo 3 > drop_caches; needs root, else skipped) and
#     warm: fio direct read, io_engine_bench read direct / buffered / auto, whole file and in
#     unaligned 1,000,003-byte ranges;
#   crc32_bench (zlib, ISA-L, libdeflate, ours).
# Each sample records the tool's own transfer time and the wall time of the command (see
# sample() below). Results: bench/results/io_engine.csv (one row per sample) and the summary
# (median, min, max per contender) on stdout. Run it as root for the cold reads.
set -euo pipefail
cd "$(dirname "$0")/.."

work=bench/work
rounds=3
small=805948632
large=6000000000
quick=0
fio_huge=0
while [[ $# -gt 0 ]]; do
    case "$1" in
        --work) work=$2; shift 2 ;;
        --rounds) rounds=$2; shift 2 ;;
        --small) small=$2; shift 2 ;;
        --large) large=$2; shift 2 ;;
        --quick) quick=1; shift ;;
        --fio-hugepages) fio_huge=1; shift ;;
        *) echo "usage: $0 [--work DIR] [--rounds N] [--small BYTES] [--large BYTES] [--quick] [--fio-hugepages]" >&2; exit 2 ;;
    esac
done

scripts/install-deps.sh --bench
cmake --preset release -DZ2F_BUILD_BENCH=ON >/dev/null
cmake --build build/release --target io_engine_bench crc32_bench -j 2 >/dev/null
bench=build/release/bench/io_engine_bench
mkdir -p "$work" bench/results
csv=bench/results/io_engine.csv
echo "test,bytes,contender,round,seconds,gbps,wall_seconds,detail" >"$csv"
can_drop=0
[[ $(id -u) -eq 0 && -w /proc/sys/vm/drop_caches ]] && can_drop=1

if [[ $fio_huge -eq 1 ]]; then
    [[ $can_drop -eq 1 ]] || { echo "--fio-hugepages needs root" >&2; exit 2; }
    old_hugepages=$(cat /proc/sys/vm/nr_hugepages)
    trap 'echo "$old_hugepages" >/proc/sys/vm/nr_hugepages' EXIT
    echo $((old_hugepages + 40)) >/proc/sys/vm/nr_hugepages
fi

log() { echo "[io_engine $(date +%H:%M:%S)] $*" >&2; }

# sample TEST BYTES CONTENDER ROUND CMD...: runs CMD and records two times: the wall time of the
# command (process start-up and exit included) and the tool's own time of the transfer, which
# is what the comparison uses: fio's job_runtime (fio spends ~0.3 s starting up here, as much as
# the transfer itself), io_engine_bench's seconds= (writer construction to finish(), fdatasync
# included), the wall time for dd (a single process doing nothing else).
sample() {
    local test=$1 bytes=$2 contender=$3 round=$4
    shift 4
    local start end out
    rm -f "$work/fio.json"
    start=$(date +%s.%N)
    out=$("$@" 2>&1 </dev/null) || { echo "FAILED: $contender: $out" >&2; exit 1; }
    end=$(date +%s.%N)
    local wall inner gbps detail
    wall=$(echo "$end - $start" | bc -l)
    detail=$(echo "$out" | grep -E '^(write|read) ' | sed 's/,/;/g' || true)
    if [[ -f "$work/fio.json" ]]; then
        inner=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["jobs"][0]["job_runtime"] / 1000)' "$work/fio.json")
        detail="fio job_runtime"
    elif [[ "$detail" =~ seconds=([0-9.]+) ]]; then
        inner=${BASH_REMATCH[1]}
    else
        inner=$wall
    fi
    gbps=$(echo "$bytes / $inner / 1000000000" | bc -l)
    printf '%s,%s,%s,%s,%.3f,%.3f,%.3f,%s\n' "$test" "$bytes" "$contender" "$round" "$inner" "$gbps" "$wall" "$detail" >>"$csv"
    printf '%-10s %-11s %-46s round %s  %6.3f s  %6.3f GB/s  (wall %6.3f s)  %s\n' "$test" "$bytes" "$contender" "$round" "$inner" "$gbps" "$wall" "$detail"
}

clean_outputs() { rm -f "$work"/out.*; sync; }

# Every writer contender as "label|command" for BYTES.
write_contenders() {
    local bytes=$1 configs=$2
    echo "fio io_uring 16x4M|fio --name=w --filename=$work/out.fio --rw=write --direct=1 --ioengine=io_uring --iodepth=16 --bs=4M --size=$((bytes / 4194304 * 4194304)) --end_fsync=1 --output-format=json --output=$work/fio.json"
    if [[ $fio_huge -eq 1 ]]; then
        echo "fio io_uring 16x4M hugepages|fio --name=w --filename=$work/out.fio --rw=write --direct=1 --ioengine=io_uring --iodepth=16 --bs=4M --size=$((bytes / 4194304 * 4194304)) --end_fsync=1 --iomem=shmhuge --output-format=json --output=$work/fio.json"
    fi
    echo "dd bs=16M oflag=direct|dd if=/dev/zero of=$work/out.dd bs=16M iflag=count_bytes count=$bytes oflag=direct conv=fsync status=none"
    local engine block inflight
    for engine in io_uring threads; do
        for config in $configs; do
            block=${config%x*}
            inflight=${config#*x}
            echo "ours $engine ${block}Mx$inflight|$bench write $work/out.ours $bytes --engine $engine --block $block --inflight $inflight --budget 64"
        done
    done
}

run_writes() {
    local test=$1 bytes=$2 configs=$3 extra=$4
    local list
    list=$(write_contenders "$bytes" "$configs"; printf '%s' "$extra")
    for round in $(seq 1 "$rounds"); do
        log "$test round $round"
        while IFS='|' read -r label command; do
            [[ -z "$label" ]] && continue
            clean_outputs
            # shellcheck disable=SC2086
            sample "$test" "$bytes" "$label" "$round" $command
        done <<<"$list"
    done
    clean_outputs
}

if [[ $quick -eq 1 ]]; then
    small_configs="4x4 8x4"
    large_configs="4x4"
else
    small_configs="1x2 1x4 1x8 4x2 4x4 4x8 8x2 8x4 8x8 16x2 16x4"
    large_configs="4x4 8x4 16x4"
fi
small_extra="ours io_uring 4Mx4 no-fallocate|$bench write $work/out.ours $small --block 4 --inflight 4 --no-prealloc
ours threads 4Mx4 no-fallocate|$bench write $work/out.ours $small --engine threads --block 4 --inflight 4 --no-prealloc
ours io_uring 4Mx4 no-huge-pages|$bench write $work/out.ours $small --engine io_uring --block 4 --inflight 4 --no-huge
ours threads 4Mx4 no-huge-pages|$bench write $work/out.ours $small --engine threads --block 4 --inflight 4 --no-huge
ours io_uring 4Mx4 buffered|$bench write $work/out.ours $small --engine io_uring --block 4 --inflight 4 --buffered-uring
ours threads 4Mx4 buffered|$bench write $work/out.ours $small --engine threads --block 4 --inflight 4 --buffered
"
run_writes write "$small" "$small_configs" "$small_extra"
run_writes write "$large" "$large_configs" ""

# --- reads of one --small file -------------------------------------------------------------
input=$work/input.bin
if [[ ! -f $input || $(stat -c %s "$input") -ne $small ]]; then
    "$bench" write "$input" "$small" >/dev/null
fi
read_contenders="fio direct io_uring 16x4M|fio --name=r --filename=$input --rw=read --direct=1 --ioengine=io_uring --iodepth=16 --bs=4M --size=$((small / 4194304 * 4194304)) --output-format=json --output=$work/fio.json
$([[ $fio_huge -eq 1 ]] && echo "fio direct io_uring 16x4M hugepages|fio --name=r --filename=$input --rw=read --direct=1 --ioengine=io_uring --iodepth=16 --bs=4M --size=$((small / 4194304 * 4194304)) --iomem=shmhuge --output-format=json --output=$work/fio.json")
ours io_uring 4Mx4 direct|$bench read $input --mode direct --engine io_uring --block 4 --inflight 4
ours threads 4Mx4 direct|$bench read $input --mode direct --engine threads --block 4 --inflight 4
ours io_uring 4Mx8 direct|$bench read $input --mode direct --engine io_uring --block 4 --inflight 8
ours io_uring 4Mx4 direct no-huge-pages|$bench read $input --mode direct --engine io_uring --block 4 --inflight 4 --no-huge
ours io_uring 4Mx4 direct 1000003-byte ranges|$bench read $input --mode direct --engine io_uring --block 4 --inflight 4 --extent 1000003
ours io_uring 4Mx4 buffered|$bench read $input --mode buffered --engine io_uring --block 4 --inflight 4
ours threads 4Mx4 buffered|$bench read $input --mode buffered --engine threads --block 4 --inflight 4
ours io_uring 4Mx4 auto|$bench read $input --mode auto --engine io_uring --block 4 --inflight 4
dd buffered bs=16M|dd if=$input of=/dev/null bs=16M status=none"
for round in $(seq 1 "$rounds"); do
    log "read round $round"
    while IFS='|' read -r label command; do
        [[ -z "$label" ]] && continue
        if [[ $can_drop -eq 1 ]]; then
            sync
            echo 3 >/proc/sys/vm/drop_caches
            # shellcheck disable=SC2086
            sample read-cold "$small" "$label" "$round" $command
        fi
        cat "$input" >/dev/null  # warm
        # shellcheck disable=SC2086
        sample read-warm "$small" "$label" "$round" $command
    done <<<"$read_contenders"
done
[[ $can_drop -eq 1 ]] || log "not root: cold reads skipped"

log "crc32_bench"
build/release/bench/crc32_bench --rounds "$rounds" | tee bench/results/crc32_bench.txt

# --- summary --------------------------------------------------------------------------------
echo
echo "median / min / max transfer seconds per contender (all samples above and in $csv)"
/usr/bin/python3 - "$csv" <<'EOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
groups = {}
for row in rows:
    groups.setdefault((row["test"], int(row["bytes"]), row["contender"]), []).append(float(row["seconds"]))
for (test, size, contender), secs in groups.items():
    med = statistics.median(secs)
    print(f"{test:10} {size:>11} {contender:46} median {med:6.3f} s ({size / med / 1e9:5.2f} GB/s)  min {min(secs):6.3f}  max {max(secs):6.3f}  n={len(secs)}")
EOF
