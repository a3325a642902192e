#!/usr/bin/env python3
"""zero2fp32-mpi against the device's limits, and the project's performance targets.

For each model size: generate (or reuse) a synthetic ZeRO checkpoint with zero2fp32-synth,
convert it once (the copy source: the tool's own fp32 output), then run every contender in
interleaved rounds (every contender once per round, each round starting one contender later, so
that drift of a noisy machine hits all of them alike), for each page-cache state of --cache:

  warm   before every contender: outputs deleted, `sync`, the inputs read once (`cat`)
  cold   before every contender: outputs deleted, `sync; echo 3 > /proc/sys/vm/drop_caches`

and in both, after deleting an output, a pause (--pause-per-gb) for the device to finish
trimming the deleted blocks (Bench.clean() says why).

The contenders of the Hugging Face rounds (fp32 output bytes = the copy source's):

  (a) the device's write limit, per round the fastest of
        fio        --rw=write --direct=1 --ioengine=io_uring --iodepth=16 --bs=4M --end_fsync=1,
                   its own job_runtime (end_fsync included; its process wall time is recorded
                   too: fio spends 0.5-1 s starting up, laying out its file and exiting)
        fio huge   the same with its buffers in huge pages (--iomem=shmhuge; root: 40 hugetlb
                   pages are reserved for the run and given back at exit). Our blocks are in
                   transparent huge pages, and on this VM that alone makes 4 MiB direct
                   requests 1.4-1.7x faster (docs/io-engine.md; /proc/diskstats shows the same
                   number and size of requests either way, fio's completion latency is what
                   drops): without this row (a) is no device limit for our writer, and a ratio
                   to it flatters the tool. --no-fio-hugepages leaves it out (then (a) is fio
                   with 4 KiB pages and dd only); the checks print the ratio to both
        dd         if=/dev/zero bs=16M iflag=count_bytes oflag=direct conv=fsync, exact bytes
                   (dd drops O_DIRECT for the unaligned last block), its process wall time
      fio moves only whole --bs blocks, so a last partial block is a second job of one
      request of its own size (--stonewall, --end_fsync there), the times of both jobs added:
      fio writes the output's bytes rounded up to 4 KiB (fio_argv())
  (b) cp -r --reflink=never of the copy source + `sync` of the copied files, the source warm
      (also in cold rounds: the copy limit from the page cache). Varies 2-3x on this VM: a
      secondary baseline
  (c) zero2fp32-mpi at each --ranks x --io x --dtype (+ --no-input-crc twins with --crc-cost),
      whole-process wall time (start-up included; the tool's own wall_seconds from its
      --summary-json and the start-up, the difference, are reported separately)
  (c') cold rounds only: fio --rw=read --direct=1 --ioengine=io_uring --iodepth=16 --bs=4M
      (and its huge-page twin) of the bytes a conversion needs, plus (a) of the same round:
      the floor for a conversion that reads and writes on one disk
  (c'') cold rounds only, shown beside (c'): the same fio read and fio write at once (one fio,
      two jobs side by side, each 16 x 4 MiB in flight; the later job's end), and its
      huge-page twin: what this disk does when reads and writes share it, as a conversion's
      do (not a target: it says how much of a gap to (c') the device itself explains)
  launcher start-up: `LAUNCHER -n N true` for each rank count started through --launcher, the
      allowance of the "N ranks not slower than 1" target; and `[LAUNCHER -n N] zero2fp32-mpi
      --version` at every rank count (the process's start-up, no conversion; launched ranks
      run MPI_Init and MPI_Finalize, a rank started alone does not start MPI): the start-up
      the MPI runtime adds beyond the launcher, reported next to it
  external: optionally any command (--external), e.g. DeepSpeed's zero_to_fp32.py

and with --universal-ranks, for the models with Adam moments (201m), rounds of their own with
(a) for the universal output's byte count, (c') for its needed bytes, and --format universal
at those rank counts x --io; then (unless --no-universal-identity) the output at 1-4 ranks,
hashed, must be the same bytes. Unless --no-identity, the first round also hashes every
Hugging Face conversion's output (untimed): the same bytes for every backend and rank count.

"Needed" bytes, computed from the checkpoint's zip files (see needed_bytes()): the
storage records that hold the selected tensors, whole (the input CRC check reads all of a
record, the partitions' alignment padding too) with their 30-byte local headers, plus every
torch file's data.pkl and zip directory; for universal output also the optimizer state records
(the moments). Every tool run reports its bytes_read against that; the target is 1.000.

Writes, under --results (bench/results/, kept in the repository), <date>-<commit>.md (every
sample, medians, ratios, the targets check), <date>-<commit>.csv (one row per contender),
<date>-<commit>-samples.csv (one row per sample) and <date>-<commit>.png. Then the metadata phase
of a 405B-shaped W=512 checkpoint (moments and masters as file holes).

Only the Python standard library, plus matplotlib for the plot (python3-matplotlib), fio, dd, cp.
"""

from __future__ import annotations

import argparse
import atexit
import csv
import datetime
import hashlib
import io as stdio
import json
import os
import pickle
import platform
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import time
import zipfile
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# Synthetic models. "201m" has the shape of the reference conversion (a 201M-parameter ZeRO-3
# checkpoint, W=4, bf16 run, Adam moments included: 2.5 GB of input for 0.8 GB of output). The
# larger ones leave the moments out so that they stay in the page cache of a small machine.
MODELS = {
    "201m": ["--preset", "1b", "--hidden", "1024", "--vocab", "32000", "--params", "2.01e8"],
    "540m": ["--preset", "1b", "--vocab", "32000", "--params", "5.4e8", "--no-moments"],
    "1.5b": ["--preset", "1b", "--no-moments"],
}
MODEL_COMMON = ["--stage", "3", "--world-size", "4", "--dtype", "bf16", "--quiet"]
METADATA_MODEL = ["--preset", "405b", "--stage", "3", "--world-size", "512", "--sparse-masters",
                  "--quiet"]

MIB = 1 << 20
FIO_BLOCK = 4 * MIB
FIO_COMMON = ["--direct=1", "--ioengine=io_uring", "--iodepth=16", "--bs=4M"]
HUGEPAGES_FOR_FIO = 80  # 160 MiB: (c'')'s two fio jobs of 16 x 4 MiB buffers, and alignment
RSS_TARGET_MIB = 64


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def round_up(value: int, unit: int) -> int:
    return -(-value // unit) * unit


# --- the bytes a conversion needs -----------------------------------------------------------
#
# A torch file is a zip: ARCHIVE/data.pkl (the pickled object tree, whose tensors refer to
# storages by key), ARCHIVE/data/KEY (one record per storage), the central directory and the
# end records. data.pkl is read here without torch: an Unpickler whose persistent_load returns
# the storage key and whose classes are inert stand-ins.

class _Stub:
    """Any class of the pickle (DeepSpeed's LossScaler, enums, ...): keeps what it was given."""

    def __new__(cls, *args, **kwargs):
        return object.__new__(cls)

    def __init__(self, *args, **kwargs):
        self.args = args

    def __setstate__(self, state):
        self.state = state


@dataclass
class _StorageRef:
    key: str


@dataclass
class _TensorRef:
    storage: _StorageRef


def _rebuild_tensor(storage, *args, **kwargs):
    return _TensorRef(storage)


def _rebuild_parameter(data, *args, **kwargs):
    return data


class _TorchUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if module == "torch._utils" and name.startswith("_rebuild_tensor"):
            return _rebuild_tensor
        if module == "torch._utils" and name.startswith("_rebuild_parameter"):
            return _rebuild_parameter
        if module == "collections" and name == "OrderedDict":
            return OrderedDict
        if module in ("builtins", "__builtin__"):
            if name == "getattr":  # getattr(SomeEnum, "member")
                return lambda *args: _Stub()
            if name in ("set", "frozenset", "dict", "list", "tuple", "slice", "complex"):
                return getattr(__import__("builtins"), name)
        return type(name, (_Stub,), {})

    def persistent_load(self, pid):
        # ("storage", storage_type, key, location, numel)
        return _StorageRef(str(pid[2]))


def storage_keys(obj, out: set[str] | None = None) -> set[str]:
    """The storage keys of every tensor in an unpickled object tree."""
    out = set() if out is None else out
    if isinstance(obj, _TensorRef):
        out.add(obj.storage.key)
    elif isinstance(obj, _StorageRef):
        out.add(obj.key)
    elif isinstance(obj, dict):
        for value in obj.values():
            storage_keys(value, out)
    elif isinstance(obj, (list, tuple, set, frozenset)):
        for value in obj:
            storage_keys(value, out)
    elif isinstance(obj, _Stub):
        storage_keys(getattr(obj, "state", None), out)
        storage_keys(getattr(obj, "args", None), out)
    return out


ZIP_LOCAL_HEADER = 30  # the fixed part of a local file header: where a record's data starts


@dataclass
class Needed:
    total: int
    per_file: dict[str, int]  # file name -> needed bytes
    record_files: list[Path]  # the files holding selected records (what fio reads for (c'))


def needed_bytes(tag: Path, universal: bool) -> Needed:
    """The input bytes a conversion of tag must read:

    - every *.pt file: its data.pkl record (with its 30-byte local header) and its zip
      directory (central directory and end records, from the directory's start to the end);
    - the records holding the selected tensors, whole, each with its 30-byte local header (the
      reader needs it to find the data; the header's name and extra field, torch's alignment
      padding, are skipped): the fp32 masters (optimizer_state_dict.fp32_flat_groups at
      ZeRO-3, .single_partition_of_fp32_groups at ZeRO-1/2 and in BF16_Optimizer files); from
      the model files, buffers and frozen parameters: at ZeRO-3 every file's
      frozen_param_fragments, else the first model file's module tensors named in
      buffer_names or frozen_param_shapes, buffers at ZeRO-3 from the first model file too;
    - universal output: also every tensor of the optimizer's state (exp_avg, exp_avg_sq, step):
      optimizer_state_dict.optimizer_state_dict.state at ZeRO-3,
      optimizer_state_dict.base_optimizer_state at ZeRO-1/2; and the model-state files whole,
      which the universal checkpoint holds copies of.

    What the tool reads beyond this shows in read ÷ needed: e.g. a 64 KiB search for the end
    of each zip directory (65,557 bytes per file, mostly bytes read again).

    The synthetic models have neither buffers nor frozen parameters: the bench's figures come
    from the optimizer files alone. Data-parallel checkpoints only (TP copies are not counted).
    """
    per_file: dict[str, int] = {}
    record_files: list[Path] = []
    first_model = True
    for path in sorted(tag.glob("*.pt")):
        with zipfile.ZipFile(path) as archive:
            infos = archive.infolist()
            directory = path.stat().st_size - archive.start_dir
            pickles = [i for i in infos if i.filename.endswith("/data.pkl")]
            if len(pickles) != 1:
                raise SystemExit(f"bench: {path}: {len(pickles)} data.pkl records")
            obj = _TorchUnpickler(stdio.BytesIO(archive.read(pickles[0]))).load()
        records = {}
        for info in infos:
            parts = info.filename.split("/")
            if len(parts) >= 3 and parts[-2] == "data":
                records[parts[-1]] = info
        keys: set[str] = set()
        if isinstance(obj, dict) and "optimizer_state_dict" in obj:
            state = obj["optimizer_state_dict"]
            for name in ("fp32_flat_groups", "single_partition_of_fp32_groups"):
                if name in state:
                    storage_keys(state[name], keys)
            if universal:  # the moments: ZeRO-3's, ZeRO-1/2's base optimizer's state
                for name in ("optimizer_state_dict", "base_optimizer_state"):
                    inner = state.get(name)
                    storage_keys(inner.get("state", inner) if isinstance(inner, dict) else inner,
                                 keys)
        elif isinstance(obj, dict) and "module" in obj:
            storage_keys(obj.get("frozen_param_fragments", {}), keys)
            if first_model:
                module = obj["module"] if isinstance(obj["module"], dict) else {}
                names = set(obj.get("buffer_names") or [])
                names |= set((obj.get("frozen_param_shapes") or {}).keys())
                for name, value in module.items():
                    if name in names:
                        storage_keys(value, keys)
            first_model = False
        missing = keys - records.keys()
        if missing:
            raise SystemExit(f"bench: {path}: storages {sorted(missing)} have no record")
        selected = sum(ZIP_LOCAL_HEADER + records[k].compress_size for k in keys)
        per_file[path.name] = (ZIP_LOCAL_HEADER + pickles[0].compress_size + directory
                               + selected)
        if universal and isinstance(obj, dict) and "module" in obj:
            per_file[path.name] = path.stat().st_size  # copied into the universal checkpoint
        if selected:
            record_files.append(path)
    return Needed(sum(per_file.values()), per_file, record_files)


# --- running and timing ---------------------------------------------------------------------

@dataclass
class Timing:
    wall: float  # seconds, outside the process: start-up and exit included
    rss: int  # wait4's ru_maxrss (not the child's own: Linux carries the parent's across exec)
    cpu: float  # user + system seconds, waited-for children included
    user: float


def timed(argv: list[str], env: dict[str, str] | None = None) -> Timing:
    start = time.perf_counter()
    process = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    stderr = process.stderr.read()
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        sys.stderr.write(stderr.decode(errors="replace"))
        raise SystemExit(f"bench: failed ({code}): {shlex.join(argv)}")
    return Timing(wall, usage.ru_maxrss * 1024, usage.ru_utime + usage.ru_stime, usage.ru_utime)


def run_checked(argv: list[str], **kwargs) -> None:
    result = subprocess.run(argv, **kwargs)
    if result.returncode != 0:
        raise SystemExit(f"bench: failed ({result.returncode}): {shlex.join(argv)}")


def files_under(path: Path) -> list[Path]:
    return sorted(p for p in path.rglob("*") if p.is_file())


def tree_digest(root: Path) -> str:
    """SHA-256 over every file's relative name and bytes, in name order."""
    digest = hashlib.sha256()
    for path in files_under(root):
        digest.update(str(path.relative_to(root)).encode() + b"\0")
        with open(path, "rb") as f:
            while chunk := f.read(16 * MIB):
                digest.update(chunk)
    return digest.hexdigest()


def fio_head(fio: str, huge: bool, output: Path) -> list[str]:
    """fio's options common to every job: direct, io_uring, 16 x 4 MiB, JSON output, and the
    buffers in huge pages when asked."""
    head = [fio, *FIO_COMMON, "--output-format=json", f"--output={output}"]
    return head + (["--iomem=shmhuge"] if huge else [])


def fio_jobs(rw: str, files: list[Path], per_file: int) -> dict[str, list[str]]:
    """The jobs moving per_file bytes (a multiple of 4 KiB) of each of files, from its start
    (one job over all files, --filename=a:b:...: fio divides --size equally among them and
    goes round robin), by phase: "bulk", whole 4 MiB blocks, and "tail", a last partial block
    as one request of its size per file (fio only moves whole --bs blocks); each without its
    --name. Writes end with --end_fsync=1 in the last job (one fsync of the file, whose blocks
    both jobs wrote)."""
    if per_file <= 0 or per_file % 4096:
        raise SystemExit(f"bench: fio of {per_file} bytes per file")
    names = ":".join(str(p).replace(":", "\\:") for p in files)  # fio's separator is ':'
    bulk = per_file // FIO_BLOCK * FIO_BLOCK
    tail = per_file - bulk
    end = ["--end_fsync=1"] if rw == "write" else []
    jobs = {}
    if bulk:
        jobs["bulk"] = [f"--rw={rw}", f"--filename={names}", f"--size={bulk * len(files)}"]
    if tail:
        jobs["tail"] = [f"--rw={rw}", f"--filename={names}", f"--offset={bulk}",
                        f"--size={tail * len(files)}", f"--bs={tail}"]
    jobs[list(jobs)[-1]] += end
    return jobs


def fio_argv(fio: str, rw: str, files: list[Path], per_file: int, huge: bool,
             output: Path) -> list[str]:
    """fio moving per_file bytes of each of files (fio_jobs()), the tail job after the bulk
    one (--stonewall)."""
    argv = fio_head(fio, huge, output)
    for phase, job in fio_jobs(rw, files, per_file).items():
        argv += [f"--name={phase}", *(["--stonewall"] if phase == "tail" else []), *job]
    return argv


def fio_both_argv(fio: str, reads: list[Path], per_read: int, write: Path, per_write: int,
                  huge: bool, output: Path) -> list[str]:
    """fio reading per_read bytes of each of reads and writing per_write bytes to write at
    the same time: the two bulk jobs side by side, then the two tail jobs side by side
    (--stonewall on the first of them only); jobs named read-bulk, write-tail, ..."""
    jobs = {"read": fio_jobs("read", reads, per_read), "write": fio_jobs("write", [write], per_write)}
    argv = fio_head(fio, huge, output)
    for phase in ("bulk", "tail"):
        first = True
        for rw, phases in jobs.items():
            if phase in phases:
                wait = ["--stonewall"] if phase == "tail" and first else []
                argv += [f"--name={rw}-{phase}", *wait, *phases[phase]]
                first = False
    return argv


def fio_both_result(path: Path) -> tuple[float, int, int]:
    """(seconds, bytes read, bytes written) of fio_both_argv(): the longer bulk job plus the
    longer tail job."""
    text = path.read_text()
    phases = {"bulk": 0.0, "tail": 0.0}
    moved = {"read": 0, "write": 0}
    for job in json.loads(text[text.index("{"):])["jobs"]:
        if job.get("error"):
            raise SystemExit(f"bench: fio reported error {job['error']} ({path})")
        rw, phase = job["jobname"].split("-", 1)
        phases[phase] = max(phases[phase], job["job_runtime"] / 1000.0)
        moved[rw] += job[rw]["io_bytes"]
    return phases["bulk"] + phases["tail"], moved["read"], moved["write"]


def fio_result(path: Path, direction: str) -> tuple[float, int]:
    """(job_runtime in seconds, bytes transferred), summed over the jobs of fio's
    --output-format=json file."""
    text = path.read_text()
    seconds, moved = 0.0, 0
    for job in json.loads(text[text.index("{"):])["jobs"]:
        if job.get("error"):
            raise SystemExit(f"bench: fio reported error {job['error']} ({path})")
        seconds += job["job_runtime"] / 1000.0
        moved += job[direction]["io_bytes"]
    return seconds, moved


# --- contenders and samples -----------------------------------------------------------------

DEVICE_WRITE = ("fio-write", "fio-write-huge", "dd")
DEVICE_READ = ("fio-read", "fio-read-huge")
DEVICE_BOTH = ("fio-rw", "fio-rw-huge")


@dataclass(frozen=True)
class Contender:
    kind: str  # fio-write, fio-write-huge, dd, cp, fio-read, fio-read-huge, launcher, z2f, external
    ranks: int = 0
    io: str = ""
    dtype: str = ""
    options: tuple[str, ...] = ()
    universal: bool = False
    nbytes: int = 0  # what a device contender moves
    options_bytes: tuple[int, int] = (0, 0)  # (c''): bytes read, bytes written

    @property
    def label(self) -> str:
        gb = f"{self.nbytes / 1e9:.3f} GB"
        if self.kind == "fio-write":
            return f"(a) fio write, direct, io_uring 16 x 4M, end_fsync ({gb})"
        if self.kind == "fio-write-huge":
            return f"(a) fio write, the same, buffers in huge pages ({gb})"
        if self.kind == "dd":
            return f"(a) dd bs=16M oflag=direct conv=fsync ({gb})"
        if self.kind == "cp":
            return "(b) cp + sync, warm source"
        if self.kind == "fio-read":
            return f"(c') fio read, direct, io_uring 16 x 4M ({gb} of the inputs)"
        if self.kind == "fio-read-huge":
            return f"(c') fio read, the same, buffers in huge pages ({gb})"
        if self.kind == "fio-rw":
            return "(c'') fio read and write at once, direct, io_uring 16 x 4M each"
        if self.kind == "fio-rw-huge":
            return "(c'') fio read and write at once, buffers in huge pages"
        if self.kind == "launcher":
            return f"launcher start-up: {self.options[0]}"
        if self.kind == "mpi-startup":
            return f"start-up: {self.options[0]}"
        if self.kind == "external":
            return "external: " + self.options[0]
        extra = "".join(" " + option for option in self.options)
        if self.universal:
            return f"zero2fp32-mpi -n {self.ranks} --io {self.io} --format universal{extra}"
        return f"zero2fp32-mpi -n {self.ranks} --io {self.io} --dtype {self.dtype}{extra}"

    @property
    def is_tool(self) -> bool:
        return self.kind == "z2f"

    @property
    def fp32_bytes(self) -> bool:
        """Writes the bytes (a) and (b) are measured for."""
        return self.kind in ("cp", "external") or (self.kind == "z2f" and (
            self.universal or self.dtype == "fp32"))


@dataclass
class Sample:
    round: int  # 1-based
    order: int  # position in its round
    seconds: float  # the time compared: fio's job_runtime, else the process's wall time
    wall: float  # process wall time
    own: float | None = None  # fio's job_runtime, the tool's summary wall_seconds
    rss: int | None = None  # the tool's own peak RSS, the maximum over ranks
    # The tool's waits for its direct reads and writes (the longest of any rank): which side
    # of the storage bound the run
    read_wait: float | None = None
    write_wait: float | None = None
    bytes_read: int | None = None
    output_bytes: int | None = None
    moved_bytes: int | None = None  # fio's io_bytes
    cpu: float = 0.0
    user: float = 0.0


@dataclass
class Series:
    """Every contender of one model, suite (hf / universal) and cache state, with its samples."""
    model: str
    suite: str
    cache: str
    output_bytes: int  # fp32 (or universal) output bytes: what (a) writes
    needed: Needed
    contenders: list[Contender]
    samples: dict[Contender, list[Sample]] = field(default_factory=dict)

    def per_round(self, kinds: tuple[str, ...]) -> dict[int, float]:
        """The fastest of these contenders in each round."""
        best: dict[int, float] = {}
        for contender, samples in self.samples.items():
            if contender.kind in kinds:
                for s in samples:
                    best[s.round] = min(best.get(s.round, float("inf")), s.seconds)
        return best

    def limit_a(self) -> dict[int, float]:
        return self.per_round(DEVICE_WRITE)

    def limit_a_as_worded(self) -> dict[int, float]:
        """(a) without the huge-page fio: fio (4 KiB-page buffers) and dd."""
        return self.per_round(("fio-write", "dd"))

    def limit_b(self) -> dict[int, float]:
        return self.per_round(("cp",))

    def limit_c(self) -> dict[int, float]:
        a = self.limit_a()
        return {r: t + a[r] for r, t in self.per_round(DEVICE_READ).items() if r in a}


def median(values) -> float:
    values = list(values)
    return statistics.median(values) if values else float("nan")


# --- the bench ------------------------------------------------------------------------------

class Bench:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.build = Path(args.build).resolve()
        self.z2f = self.build / "src" / "zero2fp32-mpi"
        self.synth = self.build / "src" / "zero2fp32-synth"
        for binary in (self.z2f, self.synth):
            if not binary.exists():
                raise SystemExit(f"bench: {binary} not found; build first (cmake --preset release)")
        self.work = Path(args.work).resolve()
        self.results = Path(args.results).resolve()
        self.work.mkdir(parents=True, exist_ok=True)
        self.results.mkdir(parents=True, exist_ok=True)
        self.env = dict(os.environ)
        if os.geteuid() == 0:
            self.env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
            self.env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        self.fio = shutil.which("fio")
        if not self.fio:
            log("no fio (scripts/install-deps.sh --bench): (a) is dd alone, no (c')")
        self.fio_huge = bool(self.fio) and not args.no_fio_hugepages and self.reserve_hugepages()
        self.out = self.work / "out"
        self.dev_file = self.work / "device-limit.bin"
        self.fio_json = self.work / "fio.json"
        self.summary = self.work / "summary.json"
        self.series: list[Series] = []
        self.infos: list[dict] = []

    # Huge pages for fio's buffers: reserved once, the old count restored at exit (also on
    # SIGTERM/SIGINT, e.g. Slurm's end of job).
    def reserve_hugepages(self) -> bool:
        knob = Path("/proc/sys/vm/nr_hugepages")
        if os.geteuid() != 0 or not knob.exists():
            log("not root: no fio with huge-page buffers ((a) is fio with 4 KiB pages and dd)")
            return False
        old = int(knob.read_text())

        def restore():
            knob.write_text(f"{old}\n")

        atexit.register(restore)
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: sys.exit(1))
        knob.write_text(f"{old + HUGEPAGES_FOR_FIO}\n")
        free = 0
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("HugePages_Free:"):
                free = int(line.split()[1])
        if free < HUGEPAGES_FOR_FIO:
            log(f"only {free} huge pages free after reserving {HUGEPAGES_FOR_FIO}: "
                f"no fio with huge-page buffers")
            return False
        return True

    def launcher_argv(self, ranks: int) -> list[str]:
        return shlex.split(self.args.launcher.format(n=ranks))

    def launched(self, ranks: int) -> bool:
        return ranks > 1 or self.args.launch_one

    def launch(self, ranks: int, argv: list[str]) -> list[str]:
        if not self.launched(ranks):
            return argv  # alone (no MPI), as `zero2fp32-mpi CKPT OUT` is usually run
        argv = self.launcher_argv(ranks) + argv
        # The identity checks run up to 4 ranks, more than a small machine has cores.
        if (ranks > (os.cpu_count() or 1) and Path(argv[0]).name in ("mpiexec", "mpirun")
                and "--oversubscribe" not in argv):
            argv.insert(1, "--oversubscribe")
        return argv

    def checkpoint(self, model: str) -> Path:
        path = self.work / f"ckpt-{model}"
        args = MODELS[model] + MODEL_COMMON
        stamp = path / ".synth-args"
        if stamp.exists() and stamp.read_text() == shlex.join(args) and (path / "latest").exists():
            return path
        shutil.rmtree(path, ignore_errors=True)
        log(f"generating {model}: zero2fp32-synth {shlex.join(args)}")
        run_checked(self.launch(self.args.synth_ranks, [str(self.synth), *args, str(path)]),
                    env=self.env)
        stamp.write_text(shlex.join(args))
        return path

    # --- one contender ---------------------------------------------------------------------

    def clean(self) -> None:
        """Deletes what the contender before wrote, then lets the device settle: on this VM's
        ext4 (mounted with `discard`) deleting an output trims its blocks, and the host keeps
        working on the trim after `rm` returns. A conversion started right after a 6 GB one was
        0.3-0.9 s slower than one started after a pause (docs/performance.md), and since the
        rounds keep the contenders' order, the contender after the 1-rank conversion (the
        2-rank one) paid for it in every round. --pause-per-gb seconds per GB deleted."""
        freed = sum(p.stat().st_size for p in files_under(self.out)) if self.out.exists() else 0
        freed += self.dev_file.stat().st_size if self.dev_file.exists() else 0
        shutil.rmtree(self.out, ignore_errors=True)
        self.dev_file.unlink(missing_ok=True)
        self.fio_json.unlink(missing_ok=True)
        self.summary.unlink(missing_ok=True)
        if freed and self.args.pause_per_gb > 0:
            os.sync()
            time.sleep(freed / 1e9 * self.args.pause_per_gb)

    def settle(self, cache: str, warm: list[Path]) -> None:
        """The page-cache state every contender starts from: `sync`, then the caches dropped
        (cold) and/or the files of `warm` read once with cat."""
        os.sync()
        if cache == "cold":
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("3\n")
        if warm:
            run_checked(["cat", *map(str, warm)], stdout=subprocess.DEVNULL)

    def z2f_argv(self, checkpoint: Path, c: Contender) -> list[str]:
        argv = [str(self.z2f), str(checkpoint), str(self.out), "--io", c.io,
                "--summary-json", str(self.summary), "--progress", "never", "-q"]
        argv += ["--format", "universal"] if c.universal else ["--dtype", c.dtype]
        return self.launch(c.ranks, argv + [*self.args.z2f_option, *c.options])

    def measure(self, c: Contender, checkpoint: Path, series: Series, copy_source: Path | None,
                inputs: list[Path]) -> Sample:
        """Runs one contender from the cache state of its series; returns its sample."""
        self.clean()
        cold = series.cache == "cold"
        if c.kind == "cp":
            # The copy limit: from a warm source in either state (cold: after the drop).
            self.settle(series.cache, files_under(copy_source))
        else:
            self.settle(series.cache, [] if cold else inputs)
        sample = Sample(0, 0, 0.0, 0.0)
        if c.kind in ("fio-write", "fio-write-huge"):
            t = timed(fio_argv(self.fio, "write", [self.dev_file], c.nbytes,
                               c.kind == "fio-write-huge", self.fio_json))
            sample.own, sample.moved_bytes = fio_result(self.fio_json, "write")
            sample.seconds = sample.own
        elif c.kind in ("fio-read", "fio-read-huge"):
            # The needed bytes from the files that hold the selected records, an equal share
            # of each (at ZeRO the optimizer files hold equal shares), each read from its
            # start: the same number of bytes from the same files, written by the same writer,
            # cold; only the offsets differ (each file's start rather than its masters'
            # record), which on one disk costs the same for 4 MiB requests. Not the records
            # themselves: fio reads one range per file, and the records' bytes are what the
            # needed count measures, not where they lie.
            files = series.needed.record_files
            t = timed(fio_argv(self.fio, "read", files, c.nbytes // len(files),
                               c.kind == "fio-read-huge", self.fio_json))
            sample.own, sample.moved_bytes = fio_result(self.fio_json, "read")
            sample.seconds = sample.own
        elif c.kind in DEVICE_BOTH:
            files = series.needed.record_files
            read_bytes, write_bytes = c.options_bytes
            t = timed(fio_both_argv(self.fio, files, read_bytes // len(files), self.dev_file,
                                    write_bytes, c.kind == "fio-rw-huge", self.fio_json))
            sample.own, read_moved, write_moved = fio_both_result(self.fio_json)
            sample.seconds = sample.own
            if read_moved < read_bytes or write_moved < write_bytes:
                raise SystemExit(f"bench: {c.label} read {read_moved} and wrote {write_moved} "
                                 f"bytes, asked {read_bytes} and {write_bytes}")
        elif c.kind == "dd":
            t = timed(["dd", "if=/dev/zero", f"of={self.dev_file}", "bs=16M", "iflag=count_bytes",
                       f"count={c.nbytes}", "oflag=direct", "conv=fsync", "status=none"])
            sample.seconds = t.wall
            sample.moved_bytes = self.dev_file.stat().st_size
        elif c.kind == "cp":
            script = 'cp -r --reflink=never "$1" "$2" && sync "$2"/*'
            t = timed(["sh", "-c", script, "sh", str(copy_source), str(self.out)])
            sample.seconds = t.wall
            sample.moved_bytes = sum(p.stat().st_size for p in files_under(self.out))
        elif c.kind == "launcher":
            t = timed(self.launcher_argv(c.ranks) + ["true"], env=self.env)
            sample.seconds = t.wall
        elif c.kind == "mpi-startup":
            t = timed(self.launch(c.ranks, [str(self.z2f), "--version"]), env=self.env)
            sample.seconds = t.wall
        elif c.kind == "external":
            argv = shlex.split(c.options[0].format(ckpt=checkpoint, out=self.out))
            t = timed(argv, env=self.env)
            sample.seconds = t.wall
            sample.output_bytes = sum(p.stat().st_size for p in files_under(self.out))
        else:
            t = timed(self.z2f_argv(checkpoint, c), env=self.env)
            report = json.loads(self.summary.read_text())
            if report["options"]["io"] != c.io:
                raise SystemExit(f"bench: asked for --io {c.io}, the summary says "
                                 f"{report['options']['io']}")
            sample.seconds = t.wall
            sample.own = report["wall_seconds"]
            sample.rss = report["peak_rss_bytes"]
            waits = report.get("io_wait_seconds", {})
            sample.read_wait, sample.write_wait = waits.get("reads"), waits.get("writes")
            sample.bytes_read = report["bytes_read"]
            sample.output_bytes = report["output_bytes"]
            # The summary counts the output files proper (not the run record, not the index,
            # not latest_universal): on disk, no fewer bytes, and no more than latest_universal.
            on_disk = sum(p.stat().st_size for p in files_under(self.out)
                          if not p.name.startswith(".zero2fp32-run")
                          and not p.name.endswith(".index.json"))
            if not 0 <= on_disk - sample.output_bytes <= 4096:
                raise SystemExit(f"bench: {c.label}: {on_disk} bytes on disk, the summary says "
                                 f"{sample.output_bytes}")
        sample.wall = t.wall
        sample.cpu, sample.user = t.cpu, t.user
        if c.kind in ("fio-write", "fio-write-huge", "fio-read", "fio-read-huge", "dd") and \
                sample.moved_bytes < c.nbytes:
            raise SystemExit(f"bench: {c.label} moved {sample.moved_bytes} bytes, "
                             f"asked {c.nbytes}")
        return sample

    def device_contenders(self, cache: str, output_bytes: int, needed: Needed) -> list[Contender]:
        """(a), and in cold rounds the reads of (c')."""
        runs = []
        fio_bytes = round_up(output_bytes, 4096)
        if self.fio:
            runs.append(Contender("fio-write", nbytes=fio_bytes))
            if self.fio_huge:
                runs.append(Contender("fio-write-huge", nbytes=fio_bytes))
        runs.append(Contender("dd", nbytes=output_bytes))
        if cache == "cold" and self.fio:
            files = needed.record_files
            smallest = min(p.stat().st_size for p in files)
            # Universal output needs (nearly) all of each file, plus the model files' pickles:
            # then each whole file, rounded down to 4 KiB (the bytes read are in the label).
            share = min(round_up(-(-needed.total // len(files)), 4096), smallest // 4096 * 4096)
            runs.append(Contender("fio-read", nbytes=share * len(files)))
            if self.fio_huge:
                runs.append(Contender("fio-read-huge", nbytes=share * len(files)))
            both = (share * len(files), fio_bytes)
            runs.append(Contender("fio-rw", nbytes=0, options_bytes=both))
            if self.fio_huge:
                runs.append(Contender("fio-rw-huge", nbytes=0, options_bytes=both))
        return runs

    def launcher_contenders(self, ranks: list[int]) -> list[Contender]:
        """The start-up allowance of the "N ranks not slower than 1" target: the launcher
        starting `true` and, for each rank count, the tool's own
        `--version` (launcher, MPI_Init, one allreduce, MPI_Finalize: no conversion)."""
        if len(set(ranks)) < 2:
            return []
        runs = []
        for n in sorted(set(ranks)):
            if self.launched(n):
                runs.append(Contender("launcher", ranks=n,
                                      options=(shlex.join(self.launcher_argv(n) + ["true"]),)))
            runs.append(Contender("mpi-startup", ranks=n, options=(shlex.join(
                self.launch(n, ["zero2fp32-mpi", "--version"])),)))
        return runs

    def run_rounds(self, series_list: list[Series], checkpoint: Path, inputs: list[Path],
                   copy_source: Path | None, identity: dict | None) -> None:
        """Interleaved rounds: each round runs every cache state's contenders once, each list
        starting one contender later than in the round before."""
        for repeat in range(self.args.repeat):
            for series in series_list:
                log(f"{series.model} {series.suite} {series.cache}: round {repeat + 1} of "
                    f"{self.args.repeat}")
                runs = series.contenders
                shift = repeat % len(runs)
                for order, c in enumerate(runs[shift:] + runs[:shift]):
                    sample = self.measure(c, checkpoint, series, copy_source, inputs)
                    sample.round, sample.order = repeat + 1, order
                    series.samples.setdefault(c, []).append(sample)
                    extra = f" (own {sample.own:.3f} s)" if sample.own is not None else ""
                    if sample.read_wait is not None and sample.write_wait is not None:
                        extra += (f" (waits: reads {sample.read_wait:.3f} s, writes "
                                  f"{sample.write_wait:.3f} s)")
                    log(f"  {c.label}: {sample.seconds:.3f} s{extra}")
                    if identity is not None and c.is_tool and repeat == 0 \
                            and series is series_list[0]:
                        identity.setdefault(c.dtype, {})[c.label] = tree_digest(self.out)
        self.clean()

    # --- the suites ------------------------------------------------------------------------

    def bench_model(self, model: str) -> None:
        checkpoint = self.checkpoint(model)
        tag = checkpoint / (checkpoint / "latest").read_text().strip()
        inputs = sorted(p for p in tag.iterdir() if p.is_file())
        copy_source = self.work / f"copy-source-{model}"

        # The copy source: the tool's own fp32 output (same files, same sizes), default options.
        shutil.rmtree(self.out, ignore_errors=True)
        shutil.rmtree(copy_source, ignore_errors=True)
        self.summary.unlink(missing_ok=True)
        run_checked([str(self.z2f), str(checkpoint), str(copy_source), "-q", "--progress",
                     "never", "--summary-json", str(self.summary)], env=self.env)
        output_bytes = json.loads(self.summary.read_text())["output_bytes"]
        needed = needed_bytes(tag, universal=False)
        info = {"model": model, "synth": shlex.join(MODELS[model] + MODEL_COMMON),
                "input_bytes": sum(p.stat().st_size for p in inputs),
                "fp32_output_bytes": output_bytes, "needed_read_bytes": needed.total}
        log(f"{model}: {info['input_bytes'] / 1e9:.2f} GB of input, {output_bytes / 1e9:.3f} GB "
            f"of fp32 output, {needed.total / 1e9:.3f} GB needed")

        tools = []
        for ranks in self.args.ranks:
            for io in self.args.io:
                for dtype in self.args.dtype:
                    tools.append(Contender("z2f", ranks, io, dtype))
                    # The input CRC check's cost: the same run without it, in the same rounds.
                    if self.args.crc_cost and dtype == "fp32":
                        tools.append(Contender("z2f", ranks, io, dtype, ("--no-input-crc",)))
        if self.args.external:
            tools.append(Contender("external", options=(self.args.external,)))
        series_list = []
        for cache in self.args.cache:
            runs = self.device_contenders(cache, output_bytes, needed)
            if not self.args.no_copy:
                runs.append(Contender("cp"))
            runs += self.launcher_contenders(self.args.ranks) + tools
            series_list.append(Series(model, "hf", cache, output_bytes, needed, runs))
        identity: dict | None = None if self.args.no_identity else {}
        self.run_rounds(series_list, checkpoint, inputs, copy_source, identity)
        if identity is not None:
            reference = tree_digest(copy_source)
            groups = {}
            for dtype, digests in identity.items():
                values = set(digests.values()) | ({reference} if dtype == "fp32" else set())
                groups[dtype] = len(values) == 1
            info["identical"] = groups
            log(f"{model}: same output bytes for every backend and rank count: {groups}")
        if not self.args.keep:
            shutil.rmtree(copy_source, ignore_errors=True)
        self.series += series_list
        self.infos.append(info)

    def bench_universal(self, model: str) -> None:
        checkpoint = self.checkpoint(model)
        tag = checkpoint / (checkpoint / "latest").read_text().strip()
        inputs = sorted(p for p in tag.iterdir() if p.is_file())
        shutil.rmtree(self.out, ignore_errors=True)
        self.summary.unlink(missing_ok=True)
        run_checked(self.launch(1, [str(self.z2f), str(checkpoint), str(self.out), "--format",
                                    "universal", "-q", "--progress", "never", "--summary-json",
                                    str(self.summary)]), env=self.env)
        output_bytes = json.loads(self.summary.read_text())["output_bytes"]
        needed = needed_bytes(tag, universal=True)
        info = {"model": model, "suite": "universal", "universal_output_bytes": output_bytes,
                "universal_files": len(files_under(self.out)), "needed_read_bytes": needed.total}
        log(f"{model}: universal checkpoint of {output_bytes / 1e9:.3f} GB in "
            f"{info['universal_files']} files, {needed.total / 1e9:.3f} GB needed")
        tools = [Contender("z2f", ranks, io, "fp32", universal=True)
                 for ranks in self.args.universal_ranks for io in self.args.io]
        series_list = []
        for cache in self.args.cache:
            runs = (self.device_contenders(cache, output_bytes, needed)
                    + self.launcher_contenders(self.args.universal_ranks) + tools)
            series_list.append(Series(model, "universal", cache, output_bytes, needed, runs))
        self.run_rounds(series_list, checkpoint, inputs, None, None)
        if not self.args.no_universal_identity:
            digests = {}
            for ranks in (1, 2, 3, 4):
                shutil.rmtree(self.out, ignore_errors=True)
                run_checked(self.launch(ranks, [str(self.z2f), str(checkpoint), str(self.out),
                                                "--format", "universal", "--io",
                                                self.args.io[0], "-q", "--progress", "never"]),
                            env=self.env)
                digests[ranks] = tree_digest(self.out)
            info["identical_at_1_to_4_ranks"] = len(set(digests.values())) == 1
            log(f"{model} universal: same bytes at 1-4 ranks: {info['identical_at_1_to_4_ranks']}")
        shutil.rmtree(self.out, ignore_errors=True)
        self.series += series_list
        self.infos.append(info)

    def bench_metadata(self) -> list[dict]:
        path = self.work / "ckpt-405b-w512"
        stamp = path / ".synth-args"
        if not (stamp.exists() and stamp.read_text() == shlex.join(METADATA_MODEL)):
            shutil.rmtree(path, ignore_errors=True)
            log("generating 405b W=512 (sparse): zero2fp32-synth " + shlex.join(METADATA_MODEL))
            run_checked(self.launch(self.args.synth_ranks,
                                    [str(self.synth), *METADATA_MODEL, str(path)]), env=self.env)
            stamp.write_text(shlex.join(METADATA_MODEL))
        rows = []
        for ranks in self.args.ranks:
            samples = []
            for _ in range(self.args.repeat):
                os.sync()  # pickles are read warm: the metadata phase, not the disk
                self.summary.unlink(missing_ok=True)
                t = timed(self.launch(ranks, [str(self.z2f), str(path), str(self.work / "out-405b"),
                                              "--dry-run", "--no-space-check", "--summary-json",
                                              str(self.summary), "-q"]), env=self.env)
                report = json.loads(self.summary.read_text())
                phases = report["phase_seconds"]
                samples.append({"wall": t.wall, "discover": phases.get("discover", 0.0),
                                "metadata": phases.get("metadata", 0.0),
                                "plan": phases.get("plan", 0.0),
                                "rss": report["peak_rss_bytes"], "tensors": report["tensors"]})
            rows.append({"ranks": ranks,
                         **{k: statistics.median(s[k] for s in samples) for k in samples[0]}})
            log(f"405b W=512 metadata at {ranks} rank(s): {rows[-1]}")
        return rows


# --- the report -----------------------------------------------------------------------------

def summarize(series: Series) -> list[dict]:
    """One row per contender of a series (and one per derived limit), in contender order."""
    a, b, c = series.limit_a(), series.limit_b(), series.limit_c()
    a_worded = series.limit_a_as_worded()
    med_a, med_b, med_c = median(a.values()), median(b.values()), median(c.values())

    def ratios(by_round: dict[int, float], fp32: bool) -> dict:
        secs = median(by_round.values())
        row = {}
        for name, limit, med in (("a", a, med_a), ("b", b, med_b), ("c", c, med_c)):
            ok = fp32 and limit and not (name == "c" and series.cache != "cold")
            row[f"x_{name}"] = secs / med if ok else ""
            row[f"x_{name}_paired"] = (median(by_round[r] / limit[r] for r in by_round
                                              if r in limit) if ok else "")
        row["x_a_as_worded"] = (secs / median(a_worded.values())
                                if fp32 and a_worded and a_worded != a else "")
        return row

    def base(label: str, kind: str) -> dict:
        return {"suite": series.suite, "model": series.model, "cache": series.cache,
                "contender": label, "kind": kind}

    rows = []
    for name, limit, text in (("a", a, "(a) = the fastest device write of each round"),
                              ("b", b, "(b) = cp + sync"),
                              ("c", c, "(c') = the fastest fio read + (a), per round")):
        if not limit or name == "b":
            continue
        rows.append({**base(text, f"limit-{name}"), "ranks": "", "io": "", "dtype": "",
                     "median_s": median(limit.values()), "min_s": min(limit.values()),
                     **ratios(limit, True), "own_s": "", "startup_s": "", "gb_per_s": "",
                     "peak_rss_mib": "", "read_x_needed": "", "bytes_read": "",
                     "cpu_s": "", "user_s": "",
                     "samples_s": " ".join(f"{limit[r]:.3f}" for r in sorted(limit)),
                     "own_samples_s": ""})
    for contender in series.contenders:
        samples = series.samples.get(contender, [])
        if not samples:
            continue
        by_round = {s.round: s.seconds for s in samples}
        secs = median(by_round.values())
        moved = (samples[0].output_bytes or samples[0].moved_bytes
                 or (series.output_bytes if contender.kind == "cp" else 0))
        own = [s.own for s in samples if s.own is not None]
        reads = [s.bytes_read for s in samples if s.bytes_read is not None]
        rows.append({
            **base(contender.label, contender.kind),
            "ranks": contender.ranks or "",
            "io": contender.io,
            "dtype": contender.dtype,
            "median_s": secs,
            "min_s": min(by_round.values()),
            **ratios(by_round, contender.fp32_bytes or contender.kind in DEVICE_WRITE + DEVICE_BOTH),
            "own_s": median(own) if own else "",
            "startup_s": (median(s.wall - s.own for s in samples) if own else ""),
            "gb_per_s": moved / secs / 1e9 if moved and contender.kind != "launcher" else "",
            "peak_rss_mib": max(s.rss for s in samples) / MIB if contender.is_tool else "",
            "read_x_needed": (max(reads) / series.needed.total if reads else ""),
            "bytes_read": (max(reads) if reads else ""),
            "cpu_s": median(s.cpu for s in samples),
            "user_s": median(s.user for s in samples),
            "samples_s": " ".join(f"{s.seconds:.3f}" for s in sorted(samples,
                                                                      key=lambda s: s.round)),
            # In round order like samples_s, for the rank-count pairs of target_checks().
            "own_samples_s": " ".join(f"{s.own:.3f}" for s in sorted(samples,
                                                                     key=lambda s: s.round)
                                      if s.own is not None),
        })
    return rows


def fmt(value, spec: str) -> str:
    return format(value, spec) if isinstance(value, (int, float)) and value == value else "—"


def series_table(series: Series, rows: list[dict]) -> list[str]:
    cold = series.cache == "cold"
    title = "Hugging Face (safetensors)" if series.suite == "hf" else "universal checkpoint"
    lines = [f"### {series.model}, {title}, {series.cache} inputs", ""]
    head = ["contender", "median s", "× (a)", "× (b)"] + (["× (c')"] if cold else []) + [
        "own s", "start-up s", "GB/s", "peak RSS MiB", "read ÷ needed",
        f"samples s, rounds 1–{series.samples and max(len(v) for v in series.samples.values())}"]
    lines.append("| " + " | ".join(head) + " |")
    lines.append("| --- | " + " | ".join("---:" for _ in head[1:-1]) + " | --- |")
    for row in rows:
        cells = [row["contender"], fmt(row["median_s"], ".3f"), fmt(row["x_a"], ".2f"),
                 fmt(row["x_b"], ".2f")]
        if cold:
            cells.append(fmt(row["x_c"], ".2f"))
        cells += [fmt(row["own_s"], ".3f"), fmt(row["startup_s"], ".3f"),
                  fmt(row["gb_per_s"], ".2f"), fmt(row["peak_rss_mib"], ".0f"),
                  fmt(row["read_x_needed"], ".4f"), row["samples_s"]]
        if row["kind"].startswith("limit"):
            cells[0] = f"**{cells[0]}**"
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def by_round(text: str) -> dict[int, float]:
    """A row's samples cell (seconds in round order; every contender runs once per round) as
    {round: seconds}."""
    return {r: float(s) for r, s in enumerate(text.split(), start=1)}


def rank_pairs(many: dict, one: dict, mpi_many: dict | None, mpi_one: dict | None) -> str:
    """The "N ranks not slower than 1" check taken round by round: on this VM the disk's own
    spread (±15 % between runs of one command) is wider than the difference asked about, so
    medians of five samples can land either way. Each round ran both rank counts and both
    `--version` start-ups from the same cache state; pairing them removes what the round had
    in common. Reported beside the verdict, not instead of it."""
    walls, walls1 = by_round(many["samples_s"]), by_round(one["samples_s"])
    own, own1 = by_round(many["own_samples_s"]), by_round(one["own_samples_s"])
    parts = []
    if mpi_many and mpi_one:
        beyond = [walls[r] - walls1[r] - (mpi_many[r] - mpi_one[r]) for r in sorted(walls)
                  if r in walls1 and r in mpi_many and r in mpi_one]
        if beyond:
            parts.append(f"per round, beyond that round's MPI start-up: median "
                         f"{median(beyond):+.3f} s, within in {sum(d <= 0 for d in beyond)} of "
                         f"{len(beyond)} rounds ({' '.join(f'{d:+.3f}' for d in beyond)})")
    gaps = [own[r] - own1[r] for r in sorted(own) if r in own1]
    if gaps:
        parts.append(f"own time, {many['ranks']} ranks − 1 per round: median "
                     f"{median(gaps):+.3f} s, faster in {sum(d < 0 for d in gaps)} of "
                     f"{len(gaps)} rounds ({' '.join(f'{d:+.3f}' for d in gaps)})")
    return f" [{'; '.join(parts)}]" if parts else ""


def target_checks(bench: Bench, all_rows: list[dict], metadata: list[dict]) -> list[str]:
    checks = []

    def verdict(ok: bool) -> str:
        return "PASS" if ok else "MISS"

    def paired(row, name):
        parts = []
        if row[f"x_{name}_paired"] != "":
            parts.append(f"per-round pairs: median {row[f'x_{name}_paired']:.2f}")
        if name == "a" and row["x_a_as_worded"] != "":
            parts.append(f"{row['x_a_as_worded']:.2f} × (a) without the huge-page fio, as "
                         f"the targets were first set against")
        return f" ({'; '.join(parts)})" if parts else ""

    tools = [r for r in all_rows if r["kind"] == "z2f"]
    hf = [r for r in tools if r["suite"] == "hf"]
    models = sorted({r["model"] for r in hf}, key=lambda m: list(MODELS).index(m))
    default_io = "direct"
    for model in models:
        for cache in bench.args.cache:
            one = [r for r in hf if r["model"] == model and r["cache"] == cache
                   and r["ranks"] == 1 and r["dtype"] == "fp32" and "--no-input-crc" not in
                   r["contender"]]
            for r in one:
                mark = " [default backend]" if r["io"] == default_io else ""
                if cache == "warm":
                    limit = {"1.5b": 1.15, "201m": 1.3}.get(model)
                    if limit is None:  # another model: by its output size
                        info = next(i for i in bench.infos if i["model"] == model)
                        limit = 1.15 if info["fp32_output_bytes"] >= 1e9 else 1.3
                    if r["x_a"] != "":
                        checks.append(f"{verdict(r['x_a'] <= limit)} {model} warm, "
                                      f"{r['contender']}{mark}: {r['x_a']:.2f} × (a) "
                                      f"(target ≤ {limit}){paired(r, 'a')}")
                    if r["x_b"] != "":
                        checks.append(f"{verdict(r['x_b'] <= 1.0)} {model} warm, "
                                      f"{r['contender']}{mark}: {r['x_b']:.2f} × (b) "
                                      f"(target ≤ 1.0){paired(r, 'b')}")
                elif r["x_c"] != "":
                    checks.append(f"{verdict(r['x_c'] <= 1.15)} {model} cold, "
                                  f"{r['contender']}{mark}: {r['x_c']:.2f} × (c') "
                                  f"(target ≤ 1.15){paired(r, 'c')}")
    # N ranks not slower than 1 beyond launcher start-up (medians, same model/cache/config).
    launch = {(r["suite"], r["model"], r["cache"], r["ranks"]): r["median_s"]
              for r in all_rows if r["kind"] == "launcher"}
    mpi = {(r["suite"], r["model"], r["cache"], r["ranks"]): r["median_s"]
           for r in all_rows if r["kind"] == "mpi-startup"}
    mpi_rounds = {(r["suite"], r["model"], r["cache"], r["ranks"]): by_round(r["samples_s"])
                  for r in all_rows if r["kind"] == "mpi-startup"}
    for r in tools:
        if r["ranks"] == 1:
            continue
        twin = [t for t in tools if t["ranks"] == 1 and t["suite"] == r["suite"]
                and t["model"] == r["model"] and t["cache"] == r["cache"]
                and t["contender"] == r["contender"].replace(f"-n {r['ranks']} ", "-n 1 ")]
        if not twin:
            continue
        key, key1 = (r["suite"], r["model"], r["cache"], r["ranks"]), (r["suite"], r["model"],
                                                                       r["cache"], 1)
        allowance = launch.get(key, 0.0) - launch.get(key1, 0.0)
        extra = r["median_s"] - twin[0]["median_s"]
        text = (f"{verdict(extra <= allowance)} {r['model']} {r['suite']} {r['cache']}, "
                f"{r['contender']}: {extra:+.3f} s against 1 rank (target ≤ the launcher's "
                f"start-up, {allowance:.3f} s")
        if key in mpi and key1 in mpi:
            mpi_allowance = mpi[key] - mpi[key1]
            text += (f"; with MPI's start-up (--version at {r['ranks']} ranks − at 1): "
                     f"{mpi_allowance:.3f} s, {'within' if extra <= mpi_allowance else 'beyond'}")
        checks.append(text + ")" + rank_pairs(r, twin[0], mpi_rounds.get(key),
                                              mpi_rounds.get(key1)))
    for suite in ("hf", "universal"):
        group = [r for r in tools if r["suite"] == suite]
        if group:
            worst = max(group, key=lambda r: r["peak_rss_mib"])
            checks.append(f"{verdict(worst['peak_rss_mib'] <= RSS_TARGET_MIB)} {suite}: peak RSS "
                          f"per rank at most {worst['peak_rss_mib']:.1f} MiB ({worst['model']} "
                          f"{worst['cache']}, {worst['contender']}; target ≤ {RSS_TARGET_MIB})")
            worst = max(group, key=lambda r: abs(r["read_x_needed"] - 1))
            over = [r for r in group if round(r["read_x_needed"], 3) != 1.0]
            checks.append(f"{verdict(not over)} {suite}: bytes read = 1.000 × needed in "
                          f"{len(group) - len(over)} of {len(group)} configurations; farthest: "
                          f"{worst['read_x_needed']:.4f} ({worst['bytes_read']:,} bytes for "
                          f"{worst['model']}, {worst['contender']})")
    for r in tools:
        if r["suite"] == "universal" and r["ranks"] == 1 and r["cache"] == "warm" \
                and r["x_a"] != "":
            mark = " [default backend]" if r["io"] == default_io else ""
            checks.append(f"{verdict(r['x_a'] <= 1.2)} {r['model']} universal warm, "
                          f"{r['contender']}{mark}: {r['x_a']:.2f} × (a) (target ≤ 1.2)"
                          f"{paired(r, 'a')}")
    # A run faster than the device can write is a measurement to explain, not a success.
    for r in tools + [r for r in all_rows if r["kind"] == "external"]:
        if r["x_a"] != "" and r["x_a"] < 0.95:
            checks.append(f"CHECK {r['model']} {r['suite']} {r['cache']}, {r['contender']}: "
                          f"{r['x_a']:.2f} × (a), faster than the device write limit")
    for info in bench.infos:
        for dtype, same in info.get("identical", {}).items():
            checks.append(f"{verdict(same)} {info['model']}: {dtype} output bytes identical for "
                          f"every backend and rank count"
                          + (" and in the copy source" if dtype == "fp32" else ""))
        if "identical_at_1_to_4_ranks" in info:
            checks.append(f"{verdict(info['identical_at_1_to_4_ranks'])} {info['model']} "
                          f"universal output identical at 1-4 ranks")
    # The input CRC check's cost, with --crc-cost.
    for r in hf:
        if "--no-input-crc" in r["contender"]:
            twin = [t for t in hf if t["model"] == r["model"] and t["cache"] == r["cache"]
                    and t["contender"] == r["contender"].replace(" --no-input-crc", "")]
            if twin:
                cost = twin[0]["median_s"] / r["median_s"] - 1
                user = (twin[0]["user_s"] - r["user_s"]) / twin[0]["median_s"]
                checks.append(f"{verdict(cost <= 0.05)} {r['model']} {r['cache']}: the input "
                              f"CRC check costs {cost * 100:+.1f} % of the wall time of "
                              f"{twin[0]['contender']} (medians; target ≤ 5 %); its user CPU "
                              f"time, {user * 100:+.1f} % of that wall time")
    if len(models) >= 2:
        small, large = models[0], models[-1]
        spreads = []
        for r in hf:
            twin = [t for t in hf if t["model"] == large and t["cache"] == r["cache"]
                    and t["contender"] == r["contender"]]
            if r["model"] == small and twin:
                spreads.append(twin[0]["peak_rss_mib"] / r["peak_rss_mib"] - 1)
        if spreads:
            worst_spread = max(spreads, key=abs)
            checks.append(f"{verdict(abs(worst_spread) <= 0.10)} RSS flat: {large} vs {small}, "
                          f"same configuration, differ by at most {worst_spread * 100:+.1f} % "
                          f"(target ±10 %)")
    for m in metadata:
        phase = m["discover"] + m["metadata"]
        checks.append(f"{verdict(phase < 2.0)} 405B W=512 discover+metadata at {m['ranks']} "
                      f"rank(s): {phase:.2f} s (target < 2 s)")
    return checks


def meminfo_gib() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) / (1 << 20)
    return 0.0


def filesystem(path: Path) -> str:
    result = subprocess.run(["df", "--output=fstype,source", str(path)], capture_output=True,
                            text=True)
    parts = result.stdout.split()
    return f"{parts[2]} ({parts[3]})" if len(parts) >= 4 else "unknown"


def tool_version(bench: Bench) -> str:
    """The binary's version and the checkout's commit (dirty or not): what was measured."""
    version = subprocess.run([str(bench.z2f), "--version"], capture_output=True, text=True,
                             env=bench.env).stdout.strip()
    commit = subprocess.run(["git", "-C", str(REPO), "describe", "--always", "--dirty"],
                            capture_output=True, text=True).stdout.strip()
    return f"{version or 'zero2fp32-mpi ?'}, built from commit {commit or '?'} in {bench.build}"


def run_name(started: datetime.datetime) -> str:
    """<date>-<commit>: the name of a run's results files, which the bench writes itself."""
    commit = subprocess.run(["git", "-C", str(REPO), "describe", "--always", "--dirty"],
                            capture_output=True, text=True).stdout.strip() or "unknown"
    return f"{started.strftime('%Y-%m-%d-%H%M')}-{commit}"


def write_results(bench: Bench, metadata: list[dict], started: str, name: str) -> list[str]:
    results = bench.results
    args = bench.args
    all_rows = []
    tables = []
    for series in bench.series:
        rows = summarize(series)
        all_rows += rows
        tables += [""] + series_table(series, rows)
    if all_rows:
        with open(results / f"{name}.csv", "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(all_rows[0].keys()))
            writer.writeheader()
            writer.writerows(all_rows)
    with open(results / f"{name}-samples.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["suite", "model", "cache", "contender", "round", "order_in_round",
                         "seconds", "wall_s", "own_s", "peak_rss_bytes", "bytes_read",
                         "needed_bytes", "output_bytes", "moved_bytes", "cpu_s", "user_s"])
        for series in bench.series:
            for contender, samples in series.samples.items():
                for s in samples:
                    writer.writerow([series.suite, series.model, series.cache, contender.label,
                                     s.round, s.order, f"{s.seconds:.4f}", f"{s.wall:.4f}",
                                     "" if s.own is None else f"{s.own:.4f}",
                                     "" if s.rss is None else s.rss,
                                     "" if s.bytes_read is None else s.bytes_read,
                                     series.needed.total,
                                     "" if s.output_bytes is None else s.output_bytes,
                                     "" if s.moved_bytes is None else s.moved_bytes,
                                     f"{s.cpu:.3f}", f"{s.user:.3f}"])

    a_kinds = "fio (direct, io_uring, 16 × 4 MiB in flight, end_fsync; its job_runtime)" + (
        ", the same fio with its buffers in huge pages" if bench.fio_huge else "") + \
        " and dd bs=16M oflag=direct conv=fsync (its wall time)" if bench.fio else \
        "dd bs=16M oflag=direct conv=fsync (no fio)"
    lines = [f"# zero2fp32-mpi benchmark, {started}", "",
             f"- machine: {os.cpu_count()} cores, {platform.release()}, {meminfo_gib():.0f} GiB "
             f"RAM; work dir {bench.work} on {filesystem(bench.work)}; load average at the end "
             f"{os.getloadavg()[0]:.1f}",
             f"- command: `{shlex.join(sys.argv)}`; {tool_version(bench)}",
             f"- {args.repeat} interleaved rounds: every contender once per round, each round "
             f"starting one contender later; cache states {', '.join(args.cache)} "
             "(warm: outputs deleted, `sync`, inputs read once with `cat`; cold: outputs "
             "deleted, `sync; echo 3 > /proc/sys/vm/drop_caches`) before every contender; "
             f"after deleting an output, {args.pause_per_gb} s per GB of it to let the device "
             "settle (the trim of the deleted blocks)",
             f"- (a), the device's write limit of each round: the fastest of {a_kinds}, writing "
             "the output's bytes (fio: rounded up to 4 KiB, a last partial 4 MiB block as a "
             "second job, both jobs' times added)",
             "- (b): `cp -r --reflink=never` of the tool's own output + `sync` of the copies, "
             "from a warm source (also in cold rounds); varies 2–3× on this VM",
             "- (c') (cold): the fastest fio direct read (io_uring, 16 × 4 MiB) of the needed "
             "bytes from the optimizer files, plus (a) of the same round",
             "- median s: fio's own job_runtime for fio, else the whole process's wall time "
             "(the tool's start-up included); own s: fio's job_runtime, the tool's "
             "`wall_seconds` (summary JSON); start-up s: wall − own. × (a), × (b), × (c'): "
             "ratios of the medians (fp32 output); the checks add the median of the per-round "
             "ratios",
             f"- launcher for more than 1 rank: `{args.launcher}`"
             + (" (1 rank too)" if args.launch_one else "; 1 rank runs alone, without MPI")
             + "; its start-up measured with `true`, the process's with `zero2fp32-mpi "
             "--version`",
             "- peak RSS: the tool's own VmHWM, maximum over ranks; read ÷ needed: the tool's "
             "bytes_read over the needed bytes (bench.py needed_bytes()), largest sample",
             ""]
    for info in bench.infos:
        if info.get("suite") == "universal":
            lines.append(f"- **{info['model']}, universal**: {info['universal_output_bytes']:,} "
                         f"bytes in {info['universal_files']} files; needed "
                         f"{info['needed_read_bytes']:,} bytes (masters and moments)")
        else:
            lines.append(f"- **{info['model']}**: `zero2fp32-synth {info['synth']}`: "
                         f"{info['input_bytes']:,} bytes of checkpoint, "
                         f"{info['fp32_output_bytes']:,} bytes of fp32 output, needed "
                         f"{info['needed_read_bytes']:,} bytes")
    lines += tables
    if metadata:
        lines += ["", "### Metadata of a 405B-shaped ZeRO-3 checkpoint, W = 512 optimizer files",
                  "", "`zero2fp32-synth " + shlex.join(METADATA_MODEL) + "`, `--dry-run`:", "",
                  "| ranks | discover s | metadata s | plan s | wall s | peak RSS MiB |",
                  "| ---: | ---: | ---: | ---: | ---: | ---: |"]
        for m in metadata:
            lines.append(f"| {m['ranks']} | {m['discover']:.3f} | {m['metadata']:.3f} | "
                         f"{m['plan']:.3f} | {m['wall']:.3f} | {m['rss'] / MIB:.0f} |")
    checks = target_checks(bench, all_rows, metadata)
    lines += ["", "### Targets", ""] + [f"- {c}" for c in checks]
    (results / f"{name}.md").write_text("\n".join(lines) + "\n")
    if all_rows:
        plot(results / f"{name}.png", all_rows, bench.args.cache)
    return lines


def plot(path: Path, rows: list[dict], caches: list[str]) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log(f"no matplotlib (apt install python3-matplotlib): {path.name} skipped")
        return
    hf = [r for r in rows if r["suite"] == "hf"]
    sizes = {}
    for r in hf:
        if r["kind"] == "z2f" and r["dtype"] == "fp32":
            sizes[r["model"]] = r["gb_per_s"] * r["median_s"]
    if not sizes:
        return
    figure, axes = plt.subplots(1, len(caches) + 1, figsize=(5.2 * (len(caches) + 1), 4.4))
    for axis, cache in zip(axes, caches):
        series: dict[str, list[tuple[float, float]]] = {}
        for r in hf:
            if r["cache"] != cache or r["model"] not in sizes:
                continue
            if r["kind"] in ("limit-a", "limit-c", "cp") or (
                    r["kind"] == "z2f" and r["dtype"] == "fp32"
                    and "--no-input-crc" not in r["contender"]):
                label = {"limit-a": "(a) device write", "limit-c": "(c') read + (a)",
                         "cp": "(b) cp + sync"}.get(r["kind"], r["contender"].replace(
                             "zero2fp32-mpi ", "").replace(" --dtype fp32", ""))
                series.setdefault(label, []).append((sizes[r["model"]], r["median_s"]))
        for label, points in sorted(series.items()):
            points.sort()
            style = {"(a)": {"linewidth": 2.5, "color": "black"},
                     "(b)": {"linewidth": 2.5, "color": "gray"},
                     "(c'": {"linewidth": 2.5, "color": "black", "linestyle": "--",
                             "marker": "s"}}.get(label[:3], {})
            style.setdefault("marker", "o")
            axis.plot([p[0] for p in points], [p[1] for p in points], label=label, **style)
        axis.set(xlabel="fp32 output (GB)", ylabel="wall time (s), median",
                 title=f"{cache} inputs, 1 and 2 ranks, fp32 output")
        axis.set_ylim(bottom=0)
        axis.legend(fontsize=7)
    rss_axis = axes[-1]
    series = {}
    for r in hf:
        if r["kind"] == "z2f" and r["model"] in sizes and r["cache"] == caches[0]:
            label = r["contender"].replace("zero2fp32-mpi ", "")
            series.setdefault(label, []).append((sizes[r["model"]], r["peak_rss_mib"]))
    for label, points in sorted(series.items()):
        points.sort()
        rss_axis.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=label)
    rss_axis.axhline(RSS_TARGET_MIB, color="red", linestyle=":",
                     label=f"{RSS_TARGET_MIB} MiB target")
    rss_axis.set(xlabel="fp32 output (GB)", ylabel="peak RSS per rank (MiB)",
                 title=f"memory ({caches[0]})", ylim=(0, RSS_TARGET_MIB * 1.5))
    rss_axis.legend(fontsize=6)
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="201m,540m,1.5b",
                        help=f"comma-separated, of {', '.join(MODELS)} (default: all)")
    parser.add_argument("--ranks", default="1,2", help="rank counts (default 1,2)")
    parser.add_argument("--io", default="direct,buffered",
                        help="write paths (default: both; the first one also runs the "
                             "universal identity check)")
    parser.add_argument("--dtype", default="fp32,bf16", help="output dtypes (default fp32,bf16)")
    parser.add_argument("--cache", default="warm,cold",
                        help="page-cache states, warm and/or cold (cold: root; default both)")
    parser.add_argument("--cold", action="store_true", help="the same as --cache cold")
    parser.add_argument("--repeat", type=int, default=3, help="interleaved rounds (median)")
    parser.add_argument("--external", default="",
                        help="another converter, {ckpt} and {out} substituted, e.g. "
                             "'python3 zero_to_fp32.py {ckpt} {out} --safe_serialization'")
    parser.add_argument("--launcher", default="mpiexec -n {n} --bind-to none",
                        help="how to start n ranks (default 'mpiexec -n {n} --bind-to none'; "
                             "on Slurm 'srun -n {n}')")
    parser.add_argument("--launch-one", action="store_true",
                        help="start 1 rank through the launcher too (default: alone, without MPI)")
    parser.add_argument("--synth-ranks", type=int, default=1, help="ranks writing checkpoints")
    parser.add_argument("--no-metadata", action="store_true", help="skip the 405B W=512 step")
    parser.add_argument("--universal-ranks", default="1,2",
                        help="rank counts of --format universal runs, for the models with "
                             "moments (default 1,2; '' for none)")
    parser.add_argument("--no-universal-identity", action="store_true",
                        help="skip the universal output's 1-4 rank identity check")
    parser.add_argument("--no-identity", action="store_true",
                        help="do not hash the first round's Hugging Face outputs")
    parser.add_argument("--skip-hf", action="store_true",
                        help="no Hugging Face rounds: universal ones only")
    parser.add_argument("--no-copy", action="store_true", help="leave out (b), cp + sync")
    parser.add_argument("--no-fio-hugepages", action="store_true",
                        help="leave out fio with huge-page buffers from (a) and (c'): the "
                             "limits with fio's 4 KiB pages and dd only")
    parser.add_argument("--crc-cost", action="store_true",
                        help="also run every fp32 configuration with --no-input-crc, in the "
                             "same rounds: the cost of the input CRC check")
    parser.add_argument("--z2f-option", action="append", default=[],
                        help="extra zero2fp32-mpi option (repeatable)")
    parser.add_argument("--build", default=str(REPO / "build" / "release"))
    parser.add_argument("--work", default=str(REPO / "bench" / "work"),
                        help="checkpoints and outputs: put it on the file system to measure")
    parser.add_argument("--results", default=str(REPO / "bench" / "results"))
    parser.add_argument("--keep", action="store_true", help="keep the copy sources")
    parser.add_argument("--pause-per-gb", type=float, default=1.5,
                        help="seconds to wait per GB of the previous contender's output after "
                             "deleting it, before the next one starts (default 1.5; 0: none)")
    args = parser.parse_args()
    args.models = [m for m in args.models.split(",") if m]
    for model in args.models:
        if model not in MODELS:
            parser.error(f"unknown model {model!r}; known: {', '.join(MODELS)}")
    args.ranks = [int(n) for n in args.ranks.split(",") if n]
    args.universal_ranks = [int(n) for n in args.universal_ranks.split(",") if n]
    args.io = [io for io in args.io.split(",") if io]
    args.dtype = [d for d in args.dtype.split(",") if d]
    args.cache = ["cold"] if args.cold else [c for c in args.cache.split(",") if c]
    for cache in args.cache:
        if cache not in ("warm", "cold"):
            parser.error(f"unknown cache state {cache!r}: warm or cold")
    if "cold" in args.cache and os.geteuid() != 0:
        parser.error("cold rounds need root (they write /proc/sys/vm/drop_caches); "
                     "use --cache warm")

    bench = Bench(args)
    now = datetime.datetime.now()
    started = now.strftime("%Y-%m-%d %H:%M")
    name = run_name(now)
    for model in args.models:
        if not args.skip_hf:
            bench.bench_model(model)
        # Universal output needs the Adam moments.
        if args.universal_ranks and "--no-moments" not in MODELS[model]:
            bench.bench_universal(model)
    # Written now and again after the metadata step: a failure there keeps the model results.
    lines = write_results(bench, [], started, name)
    if not args.no_metadata:
        lines = write_results(bench, bench.bench_metadata(), started, name)
    print("\n".join(lines))
    log(f"wrote {bench.results}/{name}.md, {name}.csv, {name}-samples.csv, {name}.png")


if __name__ == "__main__":
    main()
