#!/usr/bin/python3
"""Loads zero2fp32-mpi's outputs with the real libraries: torch (weights_only=True) for .bin,
safetensors files parsed by hand and compared through torch tensors, h5py for HDF5.

usage: check_converted_outputs.py ZERO2FP32_MPI FIXTURES_DIR WORK_DIR

For a few bundled fixtures it converts to every format (and to bf16) and checks that every
tensor equals the engine's own state dict (expected.pt) - by value, name, shape and dtype - and
that the files open the way consumers open them. Exits 77 (CTest skip) without torch or h5py.
Z2F_WITH_HDF5=0 (a build without HDF5 output) leaves the HDF5 checks out.
"""

import json
import os
import struct
import subprocess
import sys

try:
    import torch
    import h5py
    import numpy
except Exception as error:  # noqa: BLE001 - any import failure means "not installed here"
    print(f"skipping: cannot import torch/h5py ({error})")
    sys.exit(77)

BIN, FIXTURES, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
WITH_HDF5 = os.environ.get("Z2F_WITH_HDF5", "1") == "1"
FAILURES = []
DTYPES = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16, "I64": torch.int64,
          "F64": torch.float64, "I32": torch.int32, "BOOL": torch.bool, "U8": torch.uint8}


def check(condition, message):
    if not condition:
        FAILURES.append(message)
        print("FAIL:", message)


def convert(fixture, out, *options):
    subprocess.run([BIN, os.path.join(FIXTURES, fixture), out, "-q", "--overwrite", *options],
                   check=True)


def expected(fixture):
    return torch.load(os.path.join(FIXTURES, fixture, "expected.pt"))["state_dict"]


def read_safetensors(path):
    """A small independent reader: header JSON, then torch tensors from the raw bytes."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    check(n % 8 == 0, f"{path}: header length {n} not a multiple of 8")
    metadata = header.pop("__metadata__", {})
    tensors = {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        raw = bytearray(data[8 + n + begin:8 + n + end])
        dtype = DTYPES[info["dtype"]]
        tensor = torch.frombuffer(raw, dtype=dtype) if raw else torch.empty(0, dtype=dtype)
        tensors[name] = tensor.reshape(info["shape"])
    return metadata, tensors


def same(a, b):
    return a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape) and torch.equal(a, b)


for fixture in ["z3_ws2_tied_fp32", "z2_ws2_frozen_bf16", "z3_ws4_fp32", "z1_ws2_bf16opt"]:
    truth = expected(fixture)
    tied = {"lm_head.weight": "embed.weight"} if "tied" in fixture else {}

    out = os.path.join(WORK, fixture, "safetensors")
    convert(fixture, out)
    metadata, tensors = read_safetensors(os.path.join(out, "model.safetensors"))
    check(metadata.get("format") == "pt", f"{fixture}: safetensors format metadata")
    for alias, owner in tied.items():
        check(metadata.get(alias) == owner, f"{fixture}: tied alias metadata")
        tensors[alias] = tensors[owner]
    check(sorted(tensors) == sorted(truth), f"{fixture}: safetensors names")
    for name, value in truth.items():
        check(name in tensors and same(tensors[name], value), f"{fixture}: safetensors {name}")

    out = os.path.join(WORK, fixture, "torch")
    convert(fixture, out, "--format", "torch")
    loaded = torch.load(os.path.join(out, "pytorch_model.bin"), weights_only=True)
    check(sorted(loaded) == sorted(truth), f"{fixture}: .bin names")
    for name, value in truth.items():
        check(name in loaded and same(loaded[name], value), f"{fixture}: .bin {name}")
    for alias, owner in tied.items():
        check(loaded[alias].data_ptr() == loaded[owner].data_ptr(), f"{fixture}: .bin alias shares storage")

    if WITH_HDF5:
        out = os.path.join(WORK, fixture, "hdf5")
        convert(fixture, out, "--format", "hdf5")
        with h5py.File(os.path.join(out, "model.h5"), "r") as f:
            for name, value in truth.items():
                check(name in f, f"{fixture}: hdf5 has {name}")
                if name in f:
                    array = torch.from_numpy(numpy.array(f[name]))
                    check(same(array, value), f"{fixture}: hdf5 {name}")
            check(f.attrs.get("format") in ("zero2fp32", b"zero2fp32"), f"{fixture}: hdf5 root attribute")

    out = os.path.join(WORK, fixture, "bf16")
    convert(fixture, out, "--dtype", "bf16", "--format", "torch")
    loaded = torch.load(os.path.join(out, "pytorch_model.bin"), weights_only=True)
    for name, value in truth.items():
        want = value.to(torch.bfloat16) if value.is_floating_point() else value
        check(same(loaded[name], want), f"{fixture}: bf16 {name} equals torch's .to(bfloat16)")

    if WITH_HDF5:
        out = os.path.join(WORK, fixture, "hdf5_bf16")
        convert(fixture, out, "--dtype", "bf16", "--format", "hdf5")
        with h5py.File(os.path.join(out, "model.h5"), "r") as f:
            for name, value in truth.items():
                if not value.is_floating_point():
                    continue
                dataset = f[name]
                check(dataset.attrs.get("dtype") in ("bfloat16", b"bfloat16"), f"{fixture}: bf16 attribute on {name}")
                raw = torch.from_numpy(numpy.array(dataset).astype(numpy.int16)).view(torch.bfloat16)
                check(same(raw.reshape(value.shape), value.to(torch.bfloat16)), f"{fixture}: hdf5 bf16 {name}")

print(f"{len(FAILURES)} failure(s)")
sys.exit(1 if FAILURES else 0)
