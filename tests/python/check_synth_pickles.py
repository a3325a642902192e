#!/usr/bin/python3
"""Reads zero2fp32-synth checkpoints with Python alone, the way torch.load would, and
consolidates them with an independent re-implementation of zero_to_fp32's arithmetic.

usage: check_synth_pickles.py SYNTH_EXE WORK_DIR

For a few configurations (stage 2 and 3, W = 3, bf16 / fp16 / fp32, torch 2.x style, tied,
frozen, buffers) the script runs SYNTH_EXE into WORK_DIR and checks:
  - zipfile.testzip() (every CRC) and 64-byte alignment of every record's data;
  - every data.pkl loads with pickle.Unpickler + persistent_load, as torch.load does (GLOBALs
    mapped to stand-ins; nothing is executed), and every tensor view lies inside its storage
    record, whose size is numel x itemsize;
  - the fp32 masters gathered per docs/deepspeed-format.md §6.2 / §6.3 equal the value function of
    docs/synth.md, re-implemented here, for every element of every trainable parameter.
Standard library only: runs wherever python3 does.
"""

import collections
import enum
import os
import pickle
import shutil
import struct
import subprocess
import sys
import zipfile

FAILURES = []
MASK = (1 << 64) - 1
ITEMSIZE = {"FloatStorage": 4, "BFloat16Storage": 2, "HalfStorage": 2, "LongStorage": 8}


def check(condition, message):
    if not condition:
        FAILURES.append(message)
        print("FAIL:", message)


# --- the value function (docs/synth.md "Values") -------------------------------------------
def mix(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def fnv1a64(text):
    h = 0xCBF29CE484222325
    for byte in text.encode():
        h = ((h ^ byte) * 0x100000001B3) & MASK
    return h


def element_bits(seed, name, index):
    u = mix((mix(seed ^ fnv1a64(name)) + (index + 1) * 0x9E3779B97F4A7C15) & MASK)
    return ((u >> 63) << 31) | ((120 + ((u >> 23) & 7)) << 23) | (u & 0x7FFFFF)


# --- a torch.load stand-in ------------------------------------------------------------------
class ZeroStageEnum(enum.IntEnum):
    disabled = 0
    optimizer_states = 1
    gradients = 2
    weights = 3


class Opaque:
    """Any class we do not model: keeps what it was built from."""

    def __init__(self, *args):
        self.args = args

    def __setstate__(self, state):
        self.state = state


class Tensor:
    def __init__(self, storage, offset, size, stride):
        self.storage, self.offset, self.size, self.stride = storage, offset, tuple(size), stride

    def numel(self):
        n = 1
        for d in self.size:
            n *= d
        return n

    def words(self):
        """The tensor's elements as raw little-endian words (contiguous views only)."""
        item = self.storage.itemsize
        start = self.offset * item
        data = self.storage.data[start:start + self.numel() * item]
        fmt = {4: "I", 2: "H", 8: "q"}[item]
        return struct.unpack(f"<{self.numel()}{fmt}", data)


class Storage:
    def __init__(self, kind, data, numel):
        self.kind, self.data, self.numel = kind, data, numel
        self.itemsize = ITEMSIZE[kind]


def rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks, *rest):
    tensor = Tensor(storage, offset, size, stride)
    expected = tuple(int(s) for s in _contiguous(size))
    check(tuple(stride) == expected, f"non-contiguous view {size} {stride}")
    check(offset + tensor.numel() <= storage.numel, "view past its storage")
    return tensor


def _contiguous(size):
    strides, step = [], 1
    for d in reversed(size):
        strides.append(step)
        step *= max(d, 1)
    return list(reversed(strides))


class Loader(pickle.Unpickler):
    def __init__(self, archive, prefix):
        self.archive, self.prefix = archive, prefix
        super().__init__(archive.open(prefix + "data.pkl"))

    def find_class(self, module, name):
        if (module, name) == ("collections", "OrderedDict"):
            return collections.OrderedDict
        if (module, name) == ("__builtin__", "getattr"):
            return getattr
        if (module, name) == ("__builtin__", "set"):
            return set
        if (module, name) == ("torch._utils", "_rebuild_tensor_v2"):
            return rebuild_tensor_v2
        if (module, name) == ("torch._tensor", "_rebuild_from_type_v2"):
            return lambda func, cls, args, state: func(*args)
        if (module, name) == ("torch", "Size"):
            return tuple
        if module == "torch" and name in ITEMSIZE:
            return name
        if (module, name) == ("deepspeed.runtime.zero.config", "ZeroStageEnum"):
            return ZeroStageEnum
        return type(name, (Opaque,), {"module": module})

    def persistent_load(self, pid):
        tag, kind, key, location, numel = pid
        check(tag == "storage" and location == "cpu", f"persistent id {pid}")
        data = self.archive.read(self.prefix + "data/" + key)
        check(len(data) == numel * ITEMSIZE[kind], f"record data/{key} size")
        return Storage(kind, data, numel)


def load(path):
    with zipfile.ZipFile(path) as archive:
        check(archive.testzip() is None, f"{path}: CRC mismatch")
        prefix = os.path.splitext(os.path.basename(path))[0] + "/"
        with open(path, "rb") as raw:
            for info in archive.infolist():
                raw.seek(info.header_offset)
                header = raw.read(30)
                name_len, extra_len = struct.unpack("<HH", header[26:30])
                data_offset = info.header_offset + 30 + name_len + extra_len
                check(data_offset % 64 == 0, f"{path}: {info.filename} at {data_offset}")
        return Loader(archive, prefix).load()


# --- consolidation (docs/deepspeed-format.md §6) --------------------------------------------
def consolidate(tag_dir, world):
    names = sorted(os.listdir(tag_dir))
    optim = [n for n in names if n.endswith("_optim_states.pt")]
    optim.sort(key=lambda n: int(n.split("zero_pp_rank_")[1].split("_")[0]))
    model = [n for n in names if n.endswith("_model_states.pt")]
    model.sort(key=lambda n: int(n.split("rank_")[1].split("_")[0]) if "zero_pp" in n else 0)
    check(len(optim) == world, "optimizer file count")
    states = [load(os.path.join(tag_dir, n)) for n in model]
    osds = [load(os.path.join(tag_dir, n))["optimizer_state_dict"] for n in optim]
    param_shapes = states[0]["param_shapes"]
    stage = int(osds[0]["zero_stage"])
    result = {}
    if stage == 2:
        check(osds[0]["partition_count"] == [world] * len(param_shapes), "partition_count")
        for g, shapes in enumerate(param_shapes):
            flat = []
            for osd in osds:
                flat.extend(osd["single_partition_of_fp32_groups"][g].words())
            offset = 0
            for name, shape in shapes.items():
                n = Tensor(None, 0, shape, None).numel()
                result[name] = flat[offset:offset + n]
                offset += n
            check(offset == len(flat), "stage 2: consumed every element")
    else:
        check(osds[0]["partition_count"] == world, "partition_count")
        ranks = [[w for t in osd["fp32_flat_groups"] for w in t.words()] for osd in osds]
        offset = 0
        for shapes in param_shapes:
            for name, shape in shapes.items():
                n = Tensor(None, 0, shape, None).numel()
                slot = -(-n // world)
                gathered = []
                for r in range(world):
                    gathered.extend(ranks[r][offset:offset + slot])
                result[name] = gathered[:n]
                offset += slot
        check(offset == len(ranks[0]), "stage 3: consumed every element")
    return stage, result


CASES = [
    ("s2_bf16", ["--stage", "2", "--buffers", "--tied", "--frozen", "mlp"]),
    ("s3_bf16", ["--stage", "3", "--buffers", "--tied", "--frozen", "k_proj", "--sub-group-size", "1000"]),
    ("s3_fp32_torch2", ["--stage", "3", "--dtype", "fp32", "--torch2", "--zero-stage-encoding", "value"]),
    ("s2_fp16_one_group", ["--stage", "2", "--dtype", "fp16", "--param-groups", "1"]),
]


def main():
    synth, work = sys.argv[1], sys.argv[2]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    world, seed = 3, 17
    for name, options in CASES:
        out = os.path.join(work, name)
        common = ["--preset", "tiny", "--layers", "1", "--hidden", "40", "--vocab", "97",
                  "-w", str(world), "--seed", str(seed), "--quiet", out]
        subprocess.run([synth] + options + common, check=True)
        with open(os.path.join(out, "latest")) as latest:
            check(latest.read() == "global_step2", f"{name}: latest")
        stage, params = consolidate(os.path.join(out, "global_step2"), world)
        check(stage == int(options[1]), f"{name}: stage")
        check(len(params) > 5, f"{name}: parameters")
        for param, words in params.items():
            for index, word in enumerate(words):
                if word != element_bits(seed, param, index):
                    check(False, f"{name}: {param}[{index}] = {word:#x}")
                    break
        print(f"{name}: {len(params)} trainable parameters match the value function")
    if FAILURES:
        print(f"{len(FAILURES)} failures")
        return 1
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
