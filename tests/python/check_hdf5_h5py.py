#!/usr/bin/env python3
"""Reads the HDF5 sample files written by the C++ test Hdf5Layout.WriteSampleFilesForH5py and
checks them through h5py: what a Python user of our HDF5 output actually sees.

Usage: check_hdf5_h5py.py SAMPLE_DIR
Exit status 77 (CTest SKIP_RETURN_CODE) when h5py or numpy cannot be imported.

The tensors and their values mirror sample_plan() and the *_value() formulas of
tests/unit/hdf5_layout_test.cpp; keep both in sync.
"""
import os
import sys

try:
    import h5py
    import numpy as np
except ImportError as error:
    print(f"SKIP: h5py/numpy not importable ({error})")
    sys.exit(77)

# (plan index, name, shape, kind); kind says how values are built and which numpy dtype h5py
# must report. Aliases are listed with the index of their owner, whose values they share.
TENSORS = [
    (0, "embed.weight", (4, 3), "f32"),
    (1, "scale", (), "f32"),
    (2, "empty", (0, 5), "f32"),
    (3, "enc/layer.0/attn.weight", (2, 3), "bf16"),
    (4, "enc/layer.0/attn.bias", (3,), "f16"),
    (5, "step", (2,), "i64"),
    (6, "mask", (5,), "bool"),
    (7, "bytes", (3,), "u8"),
    (8, "complex", (2,), "c64"),
    (9, "fp8", (4,), "fp8"),
    (10, "counts", (3,), "i32"),
    (11, "double", (2,), "f64"),
    (12, "shorts", (2, 1), "i16"),
    (13, "big.unsigned", (2,), "u64"),
]
ALIASES = {"lm_head.weight": "embed.weight", "enc/tied.bias": "enc/layer.0/attn.bias"}
NAMES = [name for _, name, _, _ in TENSORS] + list(ALIASES)


def float_values(t, count):
    i = np.arange(count, dtype=np.uint64)
    return ((i + t) % 64).astype(np.float64) * 0.125 - 2.0


def int_values(t, count):
    i = np.arange(count, dtype=np.int64)
    return (i * 7 + t) % 251 - 125


def uint_values(t, count):
    i = np.arange(count, dtype=np.uint64)
    return (i * 7 + t) % 251


def expected(t, shape, kind, bf16_as_float):
    """(numpy dtype h5py must report, expected array)."""
    count = int(np.prod(shape, dtype=np.int64))
    f = float_values(t, count)
    if kind == "f32":
        return np.dtype("<f4"), f.astype("<f4").reshape(shape)
    if kind == "f64":
        return np.dtype("<f8"), f.reshape(shape)
    if kind == "f16":
        return np.dtype("<f2"), f.astype("<f2").reshape(shape)
    if kind == "bf16":
        if bf16_as_float:
            # h5py maps the 16-bit (8-bit exponent) float type to float32; values are exact.
            return np.dtype("<f4"), f.astype("<f4").reshape(shape)
        bits = (f.astype("<f4").view("<u4") >> 16).astype("<u2")
        return np.dtype("<u2"), bits.reshape(shape)
    if kind == "i64":
        return np.dtype("<i8"), int_values(t, count).reshape(shape)
    if kind == "i32":
        return np.dtype("<i4"), int_values(t, count).astype("<i4").reshape(shape)
    if kind == "i16":
        return np.dtype("<i2"), int_values(t, count).astype("<i2").reshape(shape)
    if kind in ("u8", "fp8"):
        return np.dtype("u1"), uint_values(t, count).astype("u1").reshape(shape)
    if kind == "u64":
        return np.dtype("<u8"), uint_values(t, count).reshape(shape)
    if kind == "bool":
        return np.dtype("bool"), ((np.arange(count) + t) % 3 == 0).reshape(shape)
    if kind == "c64":
        return np.dtype("<c8"), (f - 1j * f).astype("<c8").reshape(shape)
    raise AssertionError(kind)


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def check_file(path, bf16_as_float):
    with h5py.File(path, "r") as f:
        check(f.attrs["format"] == b"zero2fp32", f"format attribute: {f.attrs['format']!r}")
        check(f.attrs["writer"] == b"zero2fp32-mpi 0.1.0-test", "writer attribute")
        check(f.attrs["source_checkpoint"] == b"/ckpt/global_step2", "source_checkpoint")
        names = [n.decode("utf-8") for n in f["__names__"][()]]
        check(names == NAMES, f"__names__: {names}")

        for t, name, shape, kind in TENSORS:
            dataset = f[name]
            dtype, values = expected(t, shape, kind, bf16_as_float)
            check(dataset.shape == shape, f"{name}: shape {dataset.shape} != {shape}")
            check(dataset.dtype == dtype, f"{name}: dtype {dataset.dtype} != {dtype}")
            got = dataset[()]
            check(np.array_equal(got, values), f"{name}: values {got} != {values}")
            raw_bits = kind == "fp8" or (kind == "bf16" and not bf16_as_float)
            check(("dtype" in dataset.attrs) == raw_bits, f"{name}: dtype attribute presence")
            if kind == "bf16" and not bf16_as_float:
                check(dataset.attrs["dtype"] == b"bfloat16", f"{name}: bf16 attribute")
                # The documented way back to real values: the bits are the top half of fp32.
                as_float = (got.astype("<u4") << 16).view("<f4")
                check(np.array_equal(as_float, float_values(t, got.size).reshape(shape)),
                      f"{name}: bf16 bits do not decode to the expected values")
            if kind == "fp8":
                check(dataset.attrs["dtype"] == b"float8_e4m3fn", f"{name}: fp8 attribute")
            check(dataset.chunks is None and dataset.compression is None,
                  f"{name}: not contiguous/unfiltered")

        for alias, owner in ALIASES.items():
            check(isinstance(f.get(alias, getlink=True), h5py.HardLink), f"{alias}: not hard")
            check(f[alias].id.get_offset() == f[owner].id.get_offset() or
                  f[alias].size == 0, f"{alias}: not the owner's dataset")
            check(h5py.h5o.get_info(f[alias].id).addr == h5py.h5o.get_info(f[owner].id).addr,
                  f"{alias}: different object than {owner}")
            check(np.array_equal(f[alias][()], f[owner][()]), f"{alias}: values differ")
        check(isinstance(f["enc"], h5py.Group) and isinstance(f["enc/layer.0"], h5py.Group),
              "intermediate groups")


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    directory = sys.argv[1]
    check_file(os.path.join(directory, "sample.h5"), bf16_as_float=False)
    check_file(os.path.join(directory, "sample_bf16_float.h5"), bf16_as_float=True)
    print(f"h5py {h5py.version.version} (HDF5 {h5py.version.hdf5_version}): sample files OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
