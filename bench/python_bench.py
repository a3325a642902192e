#!/usr/bin/env python3
"""The Python package's state dicts against DeepSpeed's get_fp32_state_dict_from_zero_checkpoint.

usage: bench/python_bench.py --zero-to-fp32 CHECKOUT/deepspeed/utils/zero_to_fp32.py
                             [--rounds 3] [--work bench/work] [--results bench/results]

The checkpoint is bench.py's 201m one (zero2fp32-synth, ZeRO-3, W=4, bf16 training, Adam moments
included: 2.5 GB of files for a 0.8 GB fp32 state dict), generated into --work or reused from
it. DeepSpeed is not installed: the script runs the zero_to_fp32.py of a DeepSpeed checkout
(nothing of it is part of this project) with stand-ins for what it imports from DeepSpeed (a
logger, and for unpickling, DeepSpeed's ZeroStageEnum and inert classes; the constants module
is the checkout's own), and since torch 1.13 has no torch.load(mmap=True), which it calls, the
script supplies it as torch 2.x implements it: a private mapping of the file, every storage a
view of its record (so DeepSpeed reads the optimizer files as it would on torch 2.x).

Contenders, each in a fresh interpreter (torch imported before the clock starts):
  zero2fp32        zero2fp32.get_fp32_state_dict_from_zero_checkpoint(ckpt)
  deepspeed        DeepSpeed's get_fp32_state_dict_from_zero_checkpoint(ckpt)
  zero2fp32 lazy   ... lazy_mode=True, then every tensor's contiguous(), dropped at once
  deepspeed lazy   the same with DeepSpeed's
  memory floor     no reading: new tensors of the state dict's shapes made present the cheapest
                   way (huge pages advised, every page populated in one call, as the reader
                   does): what any contender pays for the memory it returns. On the
                   development VM the first use of fresh memory by a process is slow (a trap
                   to the host for every page not yet backed), so this is most of a call
Every round runs every contender once, each round starting one contender later, and before
each the checkpoint's files are read once (cat: the same warm page cache for all). A sample
is the call's wall time, its CPU time (every thread's user and system time: what a busy shared
machine does not inflate), and the peak RSS during it above the RSS before it (VmHWM, reset
with /proc/self/clear_refs after the imports). The first round also hashes the eager contenders'
tensors (after the clock): both must hold the same bytes.

Targets: zero2fp32's time <= 0.1 x DeepSpeed's (medians); its peak <= the state dict's bytes +
64 MiB; lazily, <= the largest tensor + 64 MiB. Every sample goes to --results (bench/results/,
kept in the repository), named as bench.py names its runs: <date>-<commit>-python.md (every
sample, medians, the targets), <date>-<commit>-python-samples.csv and
<date>-<commit>-python.json.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import enum
import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import logging
import mmap
import os
import resource
import shlex
import statistics
import struct
import subprocess
import sys
import time
import types
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MIB = 1 << 20
CONTENDERS = ["zero2fp32", "deepspeed", "zero2fp32 lazy", "deepspeed lazy", "memory floor"]
HEADROOM = 64 * MIB


def log(message: str) -> None:
    print(f"[python_bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# --- one contender, in its own interpreter ---------------------------------------------------

def status_bytes(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def cpu_seconds() -> float:
    """User and system time of this process, all its threads."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class _Inert:
    """A class of DeepSpeed's pickles this benchmark does not need (LossScaler, ...)."""

    def __init__(self, *args, **kwargs):
        self.args = args

    def __setstate__(self, state):
        self.state = state


class _ZeroStage(enum.IntEnum):
    """The members DeepSpeed's checkpoints name (getattr(ZeroStageEnum, 'weights'))."""

    disabled = 0
    optimizer_states = 1
    gradients = 2
    weights = 3


class _DeepSpeedStandIns(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Any deepspeed.* module not given otherwise: a package whose attributes are inert classes
    (ZeroStageEnum: the enum), so that torch.load finds what the pickles name."""

    def find_spec(self, name, path=None, target=None):
        if name == "deepspeed" or name.startswith("deepspeed."):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        module = types.ModuleType(spec.name)
        module.__path__ = []

        def attribute(attr):
            if attr.startswith("__"):
                raise AttributeError(attr)
            value = _ZeroStage if attr == "ZeroStageEnum" else type(attr, (_Inert,), {})
            setattr(module, attr, value)
            return value

        module.__getattr__ = attribute
        return module

    def exec_module(self, module):
        pass


def _record_offsets(path: str) -> dict:
    """Record name (without the archive's folder) -> offset of its data in the file."""
    offsets = {}
    with zipfile.ZipFile(path) as archive, open(path, "rb") as raw:
        for info in archive.infolist():
            raw.seek(info.header_offset)
            header = raw.read(30)
            name_length, extra_length = struct.unpack("<HH", header[26:30])
            offsets[info.filename.split("/", 1)[-1]] = (info.header_offset + 30 + name_length +
                                                        extra_length)
    return offsets


def _install_mmap_load(torch) -> None:
    """torch.load(..., mmap=True) on torch 1.13, as torch 2.x does it: a private mapping of the
    file, storages as views of their records (pages read when touched)."""
    import pickle

    plain_load = torch.load

    class MappedZip:
        def __init__(self, path):
            self.reader = torch._C.PyTorchFileReader(path)
            self.offsets = _record_offsets(path)
            with open(path, "rb") as f:
                self.mapping = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)

        def get_record(self, name):
            return self.reader.get_record(name)

        def get_storage_from_record(self, name, nbytes, _storage_type):
            return torch.frombuffer(self.mapping, dtype=torch.uint8, count=nbytes,
                                    offset=self.offsets[name])

    def load(f, map_location=None, pickle_module=None, *, mmap=False, **kwargs):
        if not mmap:
            return plain_load(f, map_location=map_location, **kwargs)
        kwargs.pop("weights_only", None)
        kwargs.setdefault("encoding", "utf-8")  # torch.load's default
        return torch.serialization._load(MappedZip(os.fspath(f)), map_location, pickle, **kwargs)

    torch.load = load


def load_deepspeed(script: Path):
    """DeepSpeed's zero_to_fp32.py as a module, with the stand-ins above."""
    import torch

    deepspeed_root = script.resolve().parents[1]  # <checkout>/deepspeed
    sys.meta_path.insert(0, _DeepSpeedStandIns())
    utils = importlib.import_module("deepspeed.utils")
    utils.logger = logging.getLogger("deepspeed")
    spec = importlib.util.spec_from_file_location(
        "deepspeed.checkpoint.constants", deepspeed_root / "checkpoint" / "constants.py")
    constants = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = constants
    spec.loader.exec_module(constants)
    _install_mmap_load(torch)
    spec = importlib.util.spec_from_file_location("deepspeed_zero_to_fp32", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _madvise(address: int, length: int, advice: int) -> None:
    import ctypes

    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.madvise(ctypes.c_void_p(address), ctypes.c_size_t(length), advice)


def memory_floor(shapes: list):
    """New tensors of the state dict's shapes and dtypes, made present the cheapest way (what
    the reader does to its destinations, io/memory_advice.hpp): huge pages advised, then every
    page populated at once. No byte of the checkpoint is read."""
    import torch

    huge, populate, page, big = 14, 23, 4096, 2 << 20  # MADV_HUGEPAGE, MADV_POPULATE_WRITE
    tensors = []
    for shape, dtype in shapes:
        tensor = torch.empty(shape, dtype=dtype)
        begin, size = tensor.data_ptr(), tensor.numel() * tensor.element_size()
        if size:
            first, last = -(-begin // big) * big, (begin + size) // big * big
            if last > first:
                _madvise(first, last - first, huge)
            _madvise(begin // page * page, -(-(begin + size) // page) * page - begin // page * page,
                     populate)
        tensors.append(tensor)
    return dict(enumerate(tensors))


def worker(args) -> None:
    import torch  # before the clock, in every contender

    if args.contender == "memory floor":
        import zero2fp32

        plan = zero2fp32.plan(args.checkpoint, parity=True)
        shapes = [(t.shape, getattr(torch, t.dtype)) for t in plan.tensors if t.alias_of is None]

        def function(_checkpoint, lazy_mode=False):
            return memory_floor(shapes)
    elif args.contender.startswith("deepspeed"):
        function = load_deepspeed(Path(args.zero_to_fp32)).get_fp32_state_dict_from_zero_checkpoint
    else:
        import zero2fp32

        function = zero2fp32.get_fp32_state_dict_from_zero_checkpoint
    lazy = args.contender.endswith("lazy")
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
    before = status_bytes("VmRSS")
    cpu_before = cpu_seconds()
    started = time.perf_counter()
    state_dict = function(args.checkpoint, lazy_mode=lazy)
    largest = 0
    total = 0
    tensors = 0
    if lazy:
        for value in state_dict.values():
            tensor = value.contiguous()
            largest = max(largest, tensor.numel() * tensor.element_size())
            total += tensor.numel() * tensor.element_size()
            tensors += 1
            del tensor
    seconds = time.perf_counter() - started
    cpu = cpu_seconds() - cpu_before
    peak = status_bytes("VmHWM")
    if not lazy:
        seen = set()
        for tensor in state_dict.values():
            if id(tensor) in seen:
                continue
            seen.add(id(tensor))
            size = tensor.numel() * tensor.element_size()
            largest = max(largest, size)
            total += size
            tensors += 1
    digest = None
    if args.digest and not lazy:
        hashes = hashlib.sha256()
        for name, tensor in state_dict.items():
            hashes.update(name.encode())
            hashes.update(str(tensor.dtype).encode() + str(tuple(tensor.shape)).encode())
            hashes.update(tensor.contiguous().view(-1).view(torch.uint8).numpy().tobytes())
        digest = hashes.hexdigest()
    Path(args.out).write_text(json.dumps({
        "seconds": seconds, "cpu_seconds": cpu, "rss_before": before, "peak_rss": peak, "peak_above": peak - before,
        "state_dict_bytes": total, "largest_tensor_bytes": largest, "tensors": tensors,
        "digest": digest}))


# --- the driver ------------------------------------------------------------------------------

def checkpoint(work: Path, build: Path) -> Path:
    """bench.py's 201m checkpoint (its name and stamp: the two scripts share it)."""
    sys.path.insert(0, str(REPO / "bench"))
    from bench import MODEL_COMMON, MODELS

    args = MODELS["201m"] + MODEL_COMMON
    path = work / "ckpt-201m"
    stamp = path / ".synth-args"
    if stamp.exists() and stamp.read_text() == shlex.join(args) and (path / "latest").exists():
        return path
    log("generating 201m: zero2fp32-synth " + shlex.join(args))
    subprocess.run([str(build / "src" / "zero2fp32-synth"), *args, str(path)], check=True)
    stamp.write_text(shlex.join(args))
    return path


def files_of(path: Path) -> list[Path]:
    return sorted(p for p in path.rglob("*") if p.is_file())


def run_contender(args, contender: str, ckpt: Path, digest: bool) -> dict:
    subprocess.run(["cat", *map(str, files_of(ckpt))], stdout=subprocess.DEVNULL, check=True)
    out = args.work / "python-bench-sample.json"
    argv = [sys.executable, __file__, "--worker", contender, "--checkpoint", str(ckpt),
            "--out", str(out), "--zero-to-fp32", str(args.zero_to_fp32)]
    if digest:
        argv.append("--digest")
    env = dict(os.environ, PYTHONPATH=str(args.build / "python"))
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True)
    process_seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{contender} failed:\n{done.stderr[-3000:]}")
    sample = json.loads(out.read_text())
    sample["process_seconds"] = process_seconds
    return sample


def write_results(args, samples: list[dict], info: dict, name: str) -> list[str]:
    with open(args.results / f"{name}-samples.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["round", "position", "contender", "seconds",
                                               "cpu_seconds", "process_seconds", "rss_before", "peak_rss",
                                               "peak_above", "state_dict_bytes",
                                               "largest_tensor_bytes", "tensors", "digest"])
        writer.writeheader()
        writer.writerows(samples)
    median = {c: {k: statistics.median(s[k] for s in samples if s["contender"] == c)
                  for k in ("seconds", "cpu_seconds", "peak_above", "process_seconds")}
              for c in CONTENDERS}
    state_bytes = samples[0]["state_dict_bytes"]
    largest = samples[0]["largest_tensor_bytes"]
    lines = [f"201m checkpoint: `zero2fp32-synth {info['synth']}` ({info['checkpoint_bytes'] / 1e9:.2f} GB "
             f"of files); state dict {state_bytes / MIB:.1f} MiB in {samples[0]['tensors']} "
             f"tensors, largest {largest / MIB:.1f} MiB. {args.rounds} rounds, warm page cache, "
             f"{info['when']}, commit {info['commit']}, DeepSpeed {info['deepspeed']}.", "",
             "| round | contender | call (s) | CPU (s) | process (s) | RSS before (MiB) | "
             "peak above it (MiB) |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for s in samples:
        lines.append(f"| {s['round']} | {s['contender']} | {s['seconds']:.3f} | "
                     f"{s['cpu_seconds']:.3f} | {s['process_seconds']:.2f} | "
                     f"{s['rss_before'] / MIB:.0f} | {s['peak_above'] / MIB:.1f} |")
    lines += ["", "| contender | median call (s) | median CPU (s) | median peak above (MiB) |",
              "| --- | ---: | ---: | ---: |"]
    for c in CONTENDERS:
        lines.append(f"| {c} | {median[c]['seconds']:.3f} | {median[c]['cpu_seconds']:.3f} | "
                     f"{median[c]['peak_above'] / MIB:.1f} |")
    ratio = median["zero2fp32"]["seconds"] / median["deepspeed"]["seconds"]
    lazy_ratio = median["zero2fp32 lazy"]["seconds"] / median["deepspeed lazy"]["seconds"]
    eager_peaks = [s["peak_above"] for s in samples if s["contender"] == "zero2fp32"]
    lazy_peaks = [s["peak_above"] for s in samples if s["contender"] == "zero2fp32 lazy"]
    digests = {s["contender"]: s["digest"] for s in samples if s["digest"]}
    same = digests.get("zero2fp32") == digests.get("deepspeed") and "zero2fp32" in digests

    def verdict(ok: bool) -> str:
        return "met" if ok else "NOT met"

    floor = median["memory floor"]["seconds"]
    lines += [
        "",
        f"- time: zero2fp32 / DeepSpeed = {ratio:.3f} (target <= 0.1: {verdict(ratio <= 0.1)}); "
        f"lazily {lazy_ratio:.3f}",
        f"- above the memory floor ({floor:.3f} s to make the state dict's memory present): "
        f"zero2fp32 {median['zero2fp32']['seconds'] - floor:.3f} s, DeepSpeed "
        f"{median['deepspeed']['seconds'] - floor:.3f} s; CPU time zero2fp32 / DeepSpeed = "
        f"{median['zero2fp32']['cpu_seconds'] / median['deepspeed']['cpu_seconds']:.3f}",
        f"- memory: zero2fp32's largest peak above its start {max(eager_peaks) / MIB:.1f} MiB "
        f"<= state dict + 64 MiB = {(state_bytes + HEADROOM) / MIB:.1f} MiB: "
        f"{verdict(max(eager_peaks) <= state_bytes + HEADROOM)}; DeepSpeed's median "
        f"{median['deepspeed']['peak_above'] / state_bytes:.2f} x the state dict",
        f"- lazy: zero2fp32's largest peak {max(lazy_peaks) / MIB:.1f} MiB <= largest tensor + "
        f"64 MiB = {(largest + HEADROOM) / MIB:.1f} MiB: "
        f"{verdict(max(lazy_peaks) <= largest + HEADROOM)}; DeepSpeed's lazy median "
        f"{median['deepspeed lazy']['peak_above'] / MIB:.1f} MiB",
        f"- the same tensors (sha256 of names, dtypes, shapes, bytes, in order): "
        f"{'yes' if same else 'NO'}",
    ]
    (args.results / f"{name}.md").write_text("\n".join(lines) + "\n")
    (args.results / f"{name}.json").write_text(json.dumps(
        {"info": info, "samples": samples, "medians": median}, indent=1))
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--zero-to-fp32", type=Path, required=True,
                        help="deepspeed/utils/zero_to_fp32.py of a DeepSpeed checkout")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--work", type=Path, default=REPO / "bench" / "work")
    parser.add_argument("--build", type=Path, default=REPO / "build" / "release")
    parser.add_argument("--results", type=Path, default=REPO / "bench" / "results")
    parser.add_argument("--worker", choices=CONTENDERS, help=argparse.SUPPRESS)
    parser.add_argument("--contender", help=argparse.SUPPRESS)
    parser.add_argument("--checkpoint", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--digest", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        args.contender = args.worker
        worker(args)
        return
    args.results.mkdir(parents=True, exist_ok=True)
    args.work.mkdir(parents=True, exist_ok=True)
    ckpt = checkpoint(args.work, args.build)
    commit = subprocess.run(["git", "-C", str(REPO), "describe", "--always", "--dirty"],
                            capture_output=True, text=True).stdout.strip()
    version_file = args.zero_to_fp32.resolve().parents[2] / "version.txt"
    deepspeed = version_file.read_text().strip() if version_file.exists() else "?"
    from bench import MODEL_COMMON, MODELS, run_name

    name = run_name(datetime.datetime.now()) + "-python"
    info = {"synth": shlex.join(MODELS["201m"] + MODEL_COMMON), "commit": commit,
            "deepspeed": deepspeed, "when": time.strftime("%Y-%m-%d %H:%M"),
            "checkpoint_bytes": sum(p.stat().st_size for p in files_of(ckpt))}
    samples = []
    for r in range(args.rounds):
        order = CONTENDERS[r % len(CONTENDERS):] + CONTENDERS[:r % len(CONTENDERS)]
        for position, contender in enumerate(order):
            sample = run_contender(args, contender, ckpt,
                                   digest=r == 0 and contender in ("zero2fp32", "deepspeed"))
            sample.update(round=r + 1, position=position + 1, contender=contender)
            samples.append(sample)
            log(f"round {r + 1} {contender}: {sample['seconds']:.3f} s, peak "
                f"+{sample['peak_above'] / MIB:.1f} MiB")
    print("\n".join(write_results(args, samples, info, name)))
    log(f"wrote {args.results}/{name}.md, {name}-samples.csv, {name}.json")


if __name__ == "__main__":
    main()
