#!/usr/bin/python3
"""Loads the torch .bin files our writer produces with real torch and Python's zipfile.

usage: check_torch_bin.py WRITER_EXE WORK_DIR

WRITER_EXE is tests/tools/write_sample_bin (z2f_write_sample_bin). The script runs it twice into
WORK_DIR/run1 and WORK_DIR/run2 and checks:
  - zipfile.testzip() (every CRC), 64-byte alignment of every record's data, record order;
  - torch.load(weights_only=True) gives the expected names, dtypes, shapes and values, the tied
    alias shares its owner's storage, and (torch >= 2.1) torch.load(mmap=True) agrees;
  - the sequential TorchZipWriter output and a second run are byte-identical;
  - values.pkl unpickles with the standard pickle module to the DeepSpeed-shaped value built in
    C++ (GLOBALs mapped to stand-ins; nothing from the file is executed);
  - the sparse 5 GiB ZIP64 archive opens in zipfile and in torch's own zip reader (miniz), and
    its small records read back correctly (the 5 GiB record itself is never read).
Exits 77 (CTest skip) when torch cannot be imported.
"""

import collections
import os
import pickle
import shutil
import struct
import subprocess
import sys
import zipfile

try:
    import torch
except Exception as error:  # noqa: BLE001 - any import failure means "no torch here"
    print(f"skipping: cannot import torch ({error})")
    sys.exit(77)

FAILURES = []


def check(condition, message):
    if not condition:
        FAILURES.append(message)
        print("FAIL:", message)


def sample_value(dtype, j, index):
    """Mirror of tests/support/torch_bin_sample.cpp sample_values()."""
    if dtype in (torch.float32, torch.float64, torch.bfloat16, torch.float16):
        return (index + 1) * 0.5 + j * 0.25
    if dtype == torch.int64:
        return index * 1000 + 7 * j + (1 << 40)
    if dtype == torch.int32:
        return index * 1000 + 7 * j
    if dtype == torch.bool:
        return bool((index + j) % 2)
    raise ValueError(dtype)


# name: (plan index, dtype, shape) as in tests/support/torch_bin_sample.cpp sample_plan().
EXPECTED = collections.OrderedDict([
    ("a.weight", (0, torch.float32, (3, 5))),
    ("a.bias", (1, torch.float32, (5,))),
    ("b.scale", (2, torch.bfloat16, (2, 2))),
    ("b.half", (3, torch.float16, (3,))),
    ("step", (4, torch.float32, ())),
    ("empty", (5, torch.float32, (0, 3))),
    ("position_ids", (6, torch.int64, (1, 6))),
    ("mask", (7, torch.bool, (4,))),
    ("c.double", (8, torch.float64, (2,))),
    ("also_empty", (9, torch.bfloat16, (2, 0))),
    ("tied.weight", (0, torch.float32, (3, 5))),  # alias of a.weight: its values
])


def data_offset(path, info):
    with open(path, "rb") as f:
        f.seek(info.header_offset)
        header = f.read(30)
    name_len, extra_len = struct.unpack("<HH", header[26:30])
    return info.header_offset + 30 + name_len + extra_len


def check_zip(path, archive):
    with zipfile.ZipFile(path) as z:
        check(z.testzip() is None, f"{path}: testzip found a bad CRC")
        infos = z.infolist()
        names = [i.filename for i in infos]
        storages = [f"{archive}/data/{k}" for k in range(len(names) - 3)]
        check(names == [f"{archive}/data.pkl", f"{archive}/byteorder"] + storages +
              [f"{archive}/version"], f"{path}: record order {names}")
        check(z.read(f"{archive}/byteorder") == b"little", "byteorder record")
        check(z.read(f"{archive}/version") == b"3\n", "version record")
        for info in infos:
            check(info.compress_type == zipfile.ZIP_STORED, f"{info.filename}: not stored")
            check(data_offset(path, info) % 64 == 0, f"{info.filename}: data not 64-aligned")


def check_state_dict(sd, label):
    check(list(sd.keys()) == list(EXPECTED.keys()), f"{label}: keys {list(sd.keys())}")
    for name, (index, dtype, shape) in EXPECTED.items():
        t = sd[name]
        check(t.dtype == dtype, f"{label}: {name} dtype {t.dtype}")
        check(tuple(t.shape) == shape, f"{label}: {name} shape {tuple(t.shape)}")
        check(not t.requires_grad, f"{label}: {name} requires_grad")
        flat = t.reshape(-1)
        expected = [sample_value(dtype, j, index) for j in range(flat.numel())]
        got = flat.tolist()
        check(got == expected, f"{label}: {name} values {got} != {expected}")
    a, tied = sd["a.weight"], sd["tied.weight"]
    check(a.data_ptr() == tied.data_ptr(), f"{label}: tied.weight does not share a.weight's memory")
    check(a.storage().data_ptr() == tied.storage().data_ptr(), f"{label}: storages differ")


def check_values(path):
    class Stub:
        def __init__(self, *args):
            self.args = args

        def __setstate__(self, state):
            self.state = state

    class LossScaler(Stub):
        pass

    mapping = {
        ("collections", "OrderedDict"): collections.OrderedDict,
        ("torch", "Size"): lambda dims: ("Size", dims),
        ("torch._utils", "_rebuild_tensor_v2"): lambda *args: ("tensor",) + args,
        ("torch", "FloatStorage"): "FloatStorage",
        ("torch", "LongStorage"): "LongStorage",
        ("deepspeed.runtime.zero.config", "ZeroStageEnum"): lambda v: ("ZeroStageEnum", v),
        ("deepspeed.runtime.fp16.loss_scaler", "LossScaler"): LossScaler,
    }

    class Unpickler(pickle.Unpickler):
        def find_class(self, module, name):
            if (module, name) in mapping:
                return mapping[(module, name)]
            if (module, name) in (("_codecs", "encode"), ("__builtin__", "bytes")):
                return super().find_class(module, name)  # the real codecs.encode / bytes
            raise pickle.UnpicklingError(f"unexpected global {module}.{name}")

        def persistent_load(self, pid):
            return ("persid",) + tuple(pid)

    with open(path, "rb") as f:
        value = Unpickler(f).load()

    osd = value["optimizer_state_dict"]
    check(osd["zero_stage"] == ("ZeroStageEnum", 3), f"zero_stage {osd['zero_stage']}")
    scaler = osd["loss_scaler"]
    check(isinstance(scaler, LossScaler) and scaler.state == {"cur_scale": 65536.0,
                                                              "dynamic": False},
          "loss_scaler state")
    check(osd["dynamic_loss_scale"] is False, "dynamic_loss_scale")
    check(osd["partition_count"] == [2, 2], "partition_count")
    hooks = collections.OrderedDict()
    check(osd["fp32_flat_groups"] == [("tensor", ("persid", "storage", "FloatStorage", "0", "cpu",
                                                  10), 3, (4,), (1,), False, hooks)],
          f"fp32_flat_groups {osd['fp32_flat_groups']}")
    check(osd["step"] == ("tensor", ("persid", "storage", "LongStorage", "1", "cuda:1", 1), 0, (),
                          (), False, hooks), f"step {osd['step']}")
    shapes = value["param_shapes"]
    check(len(shapes) == 1 and isinstance(shapes[0], collections.OrderedDict), "param_shapes type")
    check(list(shapes[0].items()) == [("fc1.weight", ("Size", (53, 37))),
                                      ("fc1.bias", ("Size", (53,)))], f"param_shapes {shapes}")
    check(value["ds_version"] == "0.14.5", "ds_version")
    check(value["unicode"] == "h\u00e9llo", "unicode")
    check(value["numbers"] == (0, 255, 256, 65536, -1, -2147483649, 7000000000, -(1 << 63), 3.25,
                               -0.5), f"numbers {value['numbers']}")
    check(value["flags"] == (True, False, None), "flags")
    check(value["bytes"] == b"\x00\xffab", f"bytes {value['bytes']!r}")
    check(value["empty_bytes"] == b"", "empty bytes")
    check(value["shared_a"] == ["x", 1] and value["shared_a"] is value["shared_b"],
          "shared value is one object")
    check(value["many"] == {i: i * i for i in range(1001)}, "1001-item dict")


def check_huge(path):
    st = os.stat(path)
    if st.st_blocks * 512 > (1 << 30):
        print("note: file system wrote the sparse 5 GiB file densely; checking it anyway")
    with zipfile.ZipFile(path) as z:
        infos = {i.filename: i for i in z.infolist()}
        huge = infos["huge_sparse/data/1"]
        check(huge.file_size == 5 << 30 and huge.compress_size == 5 << 30, "huge record size")
        after = infos["huge_sparse/data/2"]
        check(after.header_offset > 0xFFFFFFFF, "record after the huge one sits above 4 GiB")
        for info in infos.values():
            check(data_offset(path, info) % 64 == 0, f"{info.filename}: not 64-aligned")
        # zipfile checks the CRC of each record it reads in full.
        small = z.read("huge_sparse/data/0")
        check(struct.unpack("<4f", small) == (0.5, 0.75, 1.0, 1.25), "small tensor bytes")
        after_bytes = z.read("huge_sparse/data/2")
        check(struct.unpack("<4f", after_bytes) == (1.5, 1.75, 2.0, 2.25), "after tensor bytes")
        pkl = z.read("huge_sparse/data.pkl")

    # torch's own (miniz) reader must accept the ZIP64 structures.
    reader = torch._C.PyTorchFileReader(path)
    records = set(reader.get_all_records())
    check({"data.pkl", "byteorder", "data/0", "data/1", "data/2", "version"} <= records,
          f"torch reader records {records}")
    check(bytes(reader.get_record("data/2")) == after_bytes, "torch reader: data/2 bytes")
    check(bytes(reader.get_record("data.pkl")) == pkl, "torch reader: data.pkl bytes")

    class Unpickler(pickle.Unpickler):
        def find_class(self, module, name):
            return {("torch._utils", "_rebuild_tensor_v2"): lambda *a: a,
                    ("collections", "OrderedDict"): collections.OrderedDict,
                    ("torch", "BFloat16Storage"): "BFloat16Storage",
                    ("torch", "FloatStorage"): "FloatStorage"}[(module, name)]

        def persistent_load(self, pid):
            return pid

    import io
    sd = Unpickler(io.BytesIO(pkl)).load()
    check(sd["huge"][0] == ("storage", "BFloat16Storage", "1", "cpu", 5 << 29), "huge persid")
    check(sd["huge"][2] == (5 << 29,), "huge size")


def main():
    writer, work = sys.argv[1], sys.argv[2]
    shutil.rmtree(work, ignore_errors=True)
    run1, run2 = os.path.join(work, "run1"), os.path.join(work, "run2")
    subprocess.run([writer, run1, "--zip64"], check=True)
    subprocess.run([writer, run2], check=True)

    sample = os.path.join(run1, "sample.bin")
    check_zip(sample, "sample")
    sd = torch.load(sample, weights_only=True)
    check_state_dict(sd, "weights_only")
    version = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2])
    if version >= (2, 1):
        check_state_dict(torch.load(sample, weights_only=True, mmap=True), "mmap")
    else:
        print(f"note: torch {torch.__version__} has no mmap=True; skipped that load")

    with open(sample, "rb") as f:
        data = f.read()
    for other in (os.path.join(run1, "sample_seq.bin"), os.path.join(run2, "sample.bin")):
        with open(other, "rb") as f:
            check(f.read() == data, f"{other} differs from {sample}")

    check_values(os.path.join(run1, "values.pkl"))
    check_huge(os.path.join(run1, "huge_sparse.bin"))

    if FAILURES:
        print(f"{len(FAILURES)} check(s) failed")
        return 1
    print(f"all checks passed (torch {torch.__version__})")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
