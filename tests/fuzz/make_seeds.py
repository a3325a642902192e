#!/usr/bin/env python3
"""Writes the fuzzers' seed inputs (a development tool; the build and the tests never run it).

    make_seeds.py FIXTURES_DIR OUT_DIR

OUT_DIR/<target>/ receives, per fuzz target:
  zip_reader              whole torch files from the fixtures (one model and one optimizer file
                          per fixture, an expected.pt, a reference .bin) and hand-made archives
                          that hit each refusal of the reader (ZIP64, compression, encryption,
                          comments, prefixes, byte order, truncation, other formats)
  pickle                  the data.pkl of every fixture file, and hand-made pickles covering the
                          opcodes of protocols 0-5, torch-shaped calls and the nesting limits
  legacy_archive          whole files in torch's legacy (non-zip) format: those of the DeepSpeed
                          0.19.6 run saved with "checkpoint_serialization": false
                          (FIXTURES_DIR/../deepspeed-newest), and hand-made ones that hit each
                          rule of the reader (other protocols, untyped storages, a pickle longer
                          than its first window, cuts, counts, keys, views, trailing bytes)
  checkpoint_interpreter  the fixtures' model and optimizer files (whole, and with CRCs zeroed so
                          that mutations of their pickles are not all stopped by the CRC check),
                          their data.pkl alone, and "model pickle SEPARATOR optimizer pickle"
                          pairs (see fuzz_checkpoint_interpreter.cpp); from the parallel
                          fixtures (FIXTURES_DIR/../deepspeed-parallel) the model file of a TP
                          rank (merge rules), optimizer files with param_slice_mappings, and the
                          layer and expert files

File names are meaningless; make_corpus.sh renames them by content hash, which dedupes.
"""

import collections
import glob
import io
import os
import pickle
import struct
import sys
import types
import zipfile

SEPARATOR = b"\n#z2f-fuzz-next-file#\n"


class Writer:
    def __init__(self, out_dir):
        self.out_dir = out_dir
        self.count = collections.Counter()

    def put(self, target, name, data):
        directory = os.path.join(self.out_dir, target)
        os.makedirs(directory, exist_ok=True)
        self.count[target] += 1
        path = os.path.join(directory, "%04d-%s" % (self.count[target], name))
        with open(path, "wb") as f:
            f.write(data)


def data_pkl(path):
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            if info.filename.endswith("/data.pkl"):
                return archive.read(info)
    raise RuntimeError(path + ": no data.pkl")


def zero_crcs(data):
    """The file with every CRC-32 of its central directory set to 0 ("not recorded")."""
    data = bytearray(data)
    pos = data.find(b"PK\x01\x02")
    while pos >= 0:
        data[pos + 16:pos + 20] = b"\0\0\0\0"
        pos = data.find(b"PK\x01\x02", pos + 4)
    return bytes(data)


# --- torch-shaped pickles without torch -----------------------------------------------------
# Fake modules whose functions pickle as torch's globals: pickle only records module and name.

def fake_module(name, *functions):
    parts = name.split(".")
    for i in range(1, len(parts)):  # pickle imports the parent packages first
        sys.modules.setdefault(".".join(parts[:i]), types.ModuleType(".".join(parts[:i])))
    module = sys.modules.get(name) or types.ModuleType(name)
    for function_name in functions:
        function = (lambda *args: None)
        function.__module__ = name
        function.__name__ = function.__qualname__ = function_name
        setattr(module, function_name, function)
    sys.modules[name] = module
    return module


torch = fake_module("torch", "Size", "Tensor", "FloatStorage", "BFloat16Storage", "HalfStorage",
                    "LongStorage", "UntypedStorage", "float8_e4m3fn", "bfloat16")
torch_utils = fake_module("torch._utils", "_rebuild_tensor", "_rebuild_tensor_v2",
                          "_rebuild_tensor_v3", "_rebuild_parameter",
                          "_rebuild_parameter_with_state")
torch_tensor = fake_module("torch._tensor", "_rebuild_from_type_v2")
zero_config = fake_module("deepspeed.runtime.zero.config", "ZeroStageEnum")


class Storage:
    def __init__(self, type_name, key, numel):
        self.type_name, self.key, self.numel = type_name, key, numel


class Call:
    """Pickles as callable(*args)."""

    def __init__(self, callable_, *args):
        self.callable, self.args = callable_, args

    def __reduce__(self):
        return (self.callable, self.args)


def tensor(storage, offset, shape, stride=None, version=2, dtype=None):
    if stride is None:
        stride, step = [], 1
        for dim in reversed(shape):
            stride.insert(0, step)
            step *= max(dim, 1)
    if version == 1:
        return Call(torch_utils._rebuild_tensor, storage, offset, tuple(shape), tuple(stride))
    if version == 3:
        return Call(torch_utils._rebuild_tensor_v3, storage, offset, tuple(shape), tuple(stride),
                    False, collections.OrderedDict(), dtype)
    return Call(torch_utils._rebuild_tensor_v2, storage, offset, tuple(shape), tuple(stride),
                False, collections.OrderedDict())


class TorchPickler(pickle.Pickler):
    def persistent_id(self, obj):
        if isinstance(obj, Storage):
            return ("storage", getattr(torch, obj.type_name), obj.key, "cpu", obj.numel)
        return None


def torch_pickle(obj, protocol=2):
    out = io.BytesIO()
    TorchPickler(out, protocol=protocol).dump(obj)
    return out.getvalue()


def deepspeed_like_pickles():
    """Small model/optimizer dicts shaped like DeepSpeed's, with tensor forms the fixtures
    lack (v1/v3 rebuilds, parameters, untyped storages, non-contiguous views)."""
    flat = Storage("FloatStorage", "0", 24)
    bf16 = Storage("BFloat16Storage", "1", 24)
    untyped = Storage("UntypedStorage", "2", 16)
    shapes = collections.OrderedDict([("a.weight", Call(torch.Size, (2, 3))),
                                      ("a.bias", Call(torch.Size, (3,)))])
    module = collections.OrderedDict([
        ("a.weight", tensor(bf16, 0, [2, 3])),
        ("a.bias", Call(torch_utils._rebuild_parameter, tensor(bf16, 6, [3], version=1), True,
                        collections.OrderedDict())),
        ("buf", tensor(untyped, 0, [2, 2], version=3, dtype=torch.float8_e4m3fn)),
        ("view", tensor(bf16, 0, [3, 2], stride=[1, 3])),
    ])
    model = {
        "module": module,
        "buffer_names": ["buf"],
        "param_shapes": [shapes],
        "frozen_param_shapes": None,
        "shared_params": {"tied.weight": "a.weight"},
        "frozen_param_fragments": None,
        "dp_world_size": 2,
        "mp_world_size": 1,
        "ds_version": "0.14.5",
    }
    wrapped = Call(torch_tensor._rebuild_from_type_v2, torch_utils._rebuild_tensor_v2,
                   torch.Tensor, (flat, 0, (12,), (1,), False, collections.OrderedDict()),
                   {"ds_id": "0_1"})
    optim_stage3 = {"optimizer_state_dict": {
        "zero_stage": Call(zero_config.ZeroStageEnum, 3),
        "fp32_flat_groups": [wrapped],
        "partition_count": 2,
        "ds_version": "0.14.5",
    }}
    optim_stage2 = {"optimizer_state_dict": {
        "zero_stage": Call(getattr, zero_config.ZeroStageEnum, "gradients"),
        "single_partition_of_fp32_groups": [tensor(flat, 0, [4])],
        "partition_count": [2],
        "ds_zero_partition_groups": [{"partition_count": 2}],
    }, "param_shapes": [shapes]}
    yield "model-v1-v3-param", torch_pickle(model)
    yield "model-proto4", torch_pickle(model, protocol=4)
    yield "optim-stage3-from-type", torch_pickle(optim_stage3)
    yield "optim-stage2-getattr", torch_pickle(optim_stage2)
    yield "pair-stage2", torch_pickle(model) + SEPARATOR + torch_pickle(optim_stage2)
    yield "pair-stage3", torch_pickle(model) + SEPARATOR + torch_pickle(optim_stage3)


# --- the legacy (non-zip) format ----------------------------------------------------------------

LEGACY_MAGIC = 0x1950a86a20f9469cfc6c


class LegacyPickler(pickle.Pickler):
    """Storages as the legacy format names them: a sixth element, the view metadata."""

    def persistent_id(self, obj):
        if isinstance(obj, Storage):
            return ("storage", getattr(torch, obj.type_name), obj.key, "cpu", obj.numel, None)
        return None


def legacy_file(obj, storages, protocol=2, keys=None, counts=None, trailer=b"",
                little_endian=True):
    """torch.save(obj, f, _use_new_zipfile_serialization=False) of `obj`, whose storages are
    `storages` (Storage -> bytes), as docs/deepspeed-format.md §2.5 lays it out."""
    out = io.BytesIO()
    pickle.dump(LEGACY_MAGIC, out, protocol=protocol)
    pickle.dump(1001, out, protocol=protocol)
    pickle.dump({"protocol_version": 1001, "little_endian": little_endian,
                 "type_sizes": {"short": 2, "int": 4, "long": 8}}, out, protocol=protocol)
    LegacyPickler(out, protocol=protocol).dump(obj)
    pickle.dump(keys if keys is not None else [s.key for s in storages], out, protocol=protocol)
    for i, (storage, data) in enumerate(storages.items()):
        count = counts[i] if counts is not None else storage.numel
        out.write(struct.pack("<q", count))
        out.write(data)
    out.write(trailer)
    return out.getvalue()


def legacy_seeds(fixtures):
    newest = os.path.join(fixtures, "..", "deepspeed-newest", "noser_z2_ws2_fp32", "global_step2")
    for name in sorted(os.listdir(newest)):
        yield name, open(os.path.join(newest, name), "rb").read()
    flat = Storage("FloatStorage", "94811", 6)
    half = Storage("BFloat16Storage", "94812", 3)
    raw = Storage("UntypedStorage", "94813", 8)
    storages = collections.OrderedDict([(flat, struct.pack("<6f", *range(6))),
                                        (half, b"\x80\x3f" * 3), (raw, bytes(range(8)))])
    obj = {"module": collections.OrderedDict([("w", tensor(flat, 1, [2, 2])),
                                              ("b", tensor(half, 0, [3])),
                                              ("u", tensor(raw, 0, [2], version=3,
                                                           dtype=torch.bfloat16))]),
           "buffer_names": [], "mp_world_size": 1}
    plain = legacy_file(obj, storages)
    yield "plain", plain
    for protocol in (3, 4, 5):
        yield "proto%d" % protocol, legacy_file(obj, storages, protocol=protocol)
    big = dict(obj, padding=["x" * 60] * 2000)  # a pickle longer than the first window
    yield "long-pickle", legacy_file(big, storages)
    yield "no-storages", legacy_file({"x": 1}, collections.OrderedDict())
    yield "big-endian", legacy_file(obj, storages, little_endian=False)
    yield "wrong-count", legacy_file(obj, storages, counts=[7, 3, 8])
    yield "negative-count", legacy_file(obj, storages, counts=[6, -1, 8])
    yield "unknown-key", legacy_file(obj, storages, keys=["94811", "94812", "nope"])
    yield "repeated-key", legacy_file(obj, storages, keys=["94811", "94811", "94813"])
    yield "missing-key", legacy_file(obj, collections.OrderedDict(list(storages.items())[:2]))
    yield "trailer", legacy_file(obj, storages, trailer=b"extra")
    for cut in (1, 14, 40, 120, len(plain) // 2, len(plain) - 1):
        yield "cut-%d" % cut, plain[:cut]
    # The first storage's view metadata (None, after its numel 6) made an int: a view.
    view = plain.replace(b"cpuq\tK\x06N", b"cpuq\tK\x06K\x00", 1)
    assert view != plain
    yield "view-metadata", view


# --- generic pickles ------------------------------------------------------------------------

class Plain:
    def __init__(self):
        self.x, self.y = 1, [2, 3]


class WithState:
    def __reduce__(self):
        return (WithState, (), {"state": 1}, iter([1, 2]), iter([("k", "v")]))


def generic_pickles():
    sample = {
        "str": "text \u00e9\u20ac\U0001f600", "bytes": b"\x00\xffabc", "int": -5,
        "int16": 40000, "int32": -(1 << 31), "big": 1 << 70, "neg_big": -(1 << 64),
        "float": 1.5, "nan": float("nan"), "none": None, "bools": [True, False],
        "tuple": (1, (2, 3), ()), "set": {1, 2}, "frozenset": frozenset({3}),
        "bytearray": bytearray(b"ab"), "nested": {"a": [{"b": (1,)}]},
        "shared": None,
    }
    shared = [1, 2]
    sample["shared"] = (shared, shared)
    for protocol in range(0, 6):
        yield "proto%d" % protocol, pickle.dumps(sample, protocol=protocol)
        yield "proto%d-objects" % protocol, pickle.dumps([Plain(), WithState()], protocol=protocol)
    recursive = []
    recursive.append(recursive)
    yield "self-reference", pickle.dumps(recursive, protocol=2)
    # Nesting just inside and just past the machine's default limit of 1000 (pickle.dumps
    # itself cannot nest that deep).
    yield "deep-999", b"\x80\x02]" + b"\x85" * 998 + b"."
    # Hand-assembled opcodes that pickle.dumps never emits for these values.
    yield "inst-obj", b"(i__main__\nC\n(cmod\nD\no(I1\nI2\nl0(N1N."
    yield "text-ops", (b"(S'a\\n\\x41'\np0\nF2.5\nL12345678901234567890L\nI01\nI00\n"
                       b"Vx\\u00e9\\U0001F600\ng0\n2tp1\n.")
    yield "binstring", b"\x80\x02T\x03\x00\x00\x00abcU\x01d\x86."
    yield "long4", b"\x80\x02\x8b\x09\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x80."
    yield "ext1", b"\x80\x02\x82\x01."
    yield "persid", b"\x80\x02P0\n."
    yield "next-buffer", b"\x80\x05\x97."
    yield "readonly-buffer", b"\x80\x05N\x98."
    yield "newobj-ex", b"\x80\x04\x8c\x01m\x8c\x01C\x93)}\x92."
    yield "pop-mark", b"\x80\x02(NN1N0N."
    yield "no-stop", b"\x80\x02N"
    yield "empty", b""
    yield "too-deep-marks", b"(" * 1001 + b"N."
    yield "too-deep-values", b"\x80\x02]" + b"\x85" * 1000 + b"."


# --- hand-made archives -----------------------------------------------------------------------

def torch_zip(entries, compression=zipfile.ZIP_STORED, comment=b"", force_zip64=False):
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=compression) as archive:
        archive.comment = comment
        for name, data in entries:
            info = zipfile.ZipInfo(name)
            info.compress_type = compression
            with archive.open(info, "w", force_zip64=force_zip64) as f:
                f.write(data)
    return out.getvalue()


def archive_entries(prefix="archive", byteorder=b"little"):
    storage = Storage("FloatStorage", "0", 4)
    pkl = torch_pickle({"t": tensor(storage, 0, [4])})
    return [(prefix + "/data.pkl", pkl), (prefix + "/byteorder", byteorder),
            (prefix + "/data/0", b"\0" * 16), (prefix + "/version", b"3\n")]


def hand_made_archives():
    yield "plain", torch_zip(archive_entries())
    yield "zip64-local", torch_zip(archive_entries(), force_zip64=True)
    yield "deflated", torch_zip(archive_entries(), compression=zipfile.ZIP_DEFLATED)
    yield "comment", torch_zip(archive_entries(), comment=b"a comment PK\x05\x06 inside")
    yield "big-endian", torch_zip(archive_entries(byteorder=b"big"))
    yield "bad-byteorder", torch_zip(archive_entries(byteorder=b"middle\n"))
    yield "no-folder", torch_zip([("data.pkl", b"\x80\x02N.")])
    yield "two-folders", torch_zip([("a/data.pkl", b"\x80\x02N."), ("b/version", b"3")])
    plain = torch_zip(archive_entries())
    encrypted = bytearray(plain)
    pos = encrypted.find(b"PK\x01\x02")
    encrypted[pos + 8] |= 1
    yield "encrypted-flag", bytes(encrypted)
    yield "truncated", plain[: len(plain) // 2]
    yield "no-end-record", plain[:-22]
    yield "legacy", (b"\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19."
                     b"\x80\x02M\xe9\x03.")
    yield "preview", b"PYTORCH1" + b"\0" * 64
    tar = bytearray(512)
    tar[257:262] = b"ustar"
    yield "tar", bytes(tar)
    yield "empty", b""


def main():
    fixtures, out_dir = sys.argv[1], sys.argv[2]
    writer = Writer(out_dir)

    torch_files = sorted(glob.glob(os.path.join(fixtures, "**", "*.pt"), recursive=True) +
                         glob.glob(os.path.join(fixtures, "**", "*.bin"), recursive=True))
    for path in torch_files:
        writer.put("pickle", os.path.basename(path) + ".pkl", data_pkl(path))

    # One model file and the rank-0 optimizer file of every tag folder.
    for tag_dir in sorted(glob.glob(os.path.join(fixtures, "*", "global_step*"))):
        names = sorted(os.listdir(tag_dir))
        model = next(n for n in names if n.endswith("model_states.pt"))
        optim = next(n for n in names if n.endswith("optim_states.pt") and "rank_0_" in n)
        model_bytes = open(os.path.join(tag_dir, model), "rb").read()
        optim_bytes = open(os.path.join(tag_dir, optim), "rb").read()
        for name, data in ((model, model_bytes), (optim, optim_bytes)):
            writer.put("zip_reader", name, data)
            writer.put("checkpoint_interpreter", name, data)
            writer.put("checkpoint_interpreter", name + ".pkl", data_pkl(os.path.join(tag_dir, name)))
        writer.put("checkpoint_interpreter", "pair-" + os.path.basename(os.path.dirname(tag_dir)),
                   data_pkl(os.path.join(tag_dir, model)) + SEPARATOR +
                   data_pkl(os.path.join(tag_dir, optim)))
    for relative in ("z2_ws2_fp32/global_step2/mp_rank_00_model_states.pt",
                     "z2_ws2_fp32/global_step2/zero_pp_rank_0_mp_rank_00_optim_states.pt",
                     "z3_ws2_fp32_torch2/global_step2/zero_pp_rank_0_mp_rank_00_optim_states.pt"):
        data = open(os.path.join(fixtures, relative), "rb").read()
        writer.put("checkpoint_interpreter", "nocrc-" + os.path.basename(relative), zero_crcs(data))
    # Tensor-, pipeline- and expert-parallel fixtures: what only they hold.
    parallel = os.path.join(fixtures, "..", "deepspeed-parallel")
    for tag_dir in sorted(glob.glob(os.path.join(parallel, "*", "global_step*"))):
        names = sorted(os.listdir(tag_dir))
        models = [n for n in names if n.startswith("mp_rank_")]
        optims = [n for n in names if n.startswith("zero_pp_rank_0_")]
        states = [n for n in names if n.startswith("layer_")][:2]
        model = models[-1]
        for name in [model] + optims[:1] + states:
            writer.put("pickle", name + ".pkl", data_pkl(os.path.join(tag_dir, name)))
            writer.put("checkpoint_interpreter", name + ".pkl", data_pkl(os.path.join(tag_dir, name)))
        if optims:
            writer.put("checkpoint_interpreter", "pair-" + os.path.basename(os.path.dirname(tag_dir)),
                       data_pkl(os.path.join(tag_dir, model)) + SEPARATOR +
                       data_pkl(os.path.join(tag_dir, optims[-1])))
    writer.put("zip_reader", "expected.pt", open(os.path.join(fixtures, "z2_ws2_fp32", "expected.pt"), "rb").read())
    writer.put("zip_reader", "pytorch_model.bin",
               open(os.path.join(fixtures, "z2_ws2_fp32", "ref", "bin", "pytorch_model.bin"), "rb").read())

    for name, data in legacy_seeds(fixtures):
        writer.put("legacy_archive", name, data)
        writer.put("checkpoint_interpreter", "legacy-" + name, data)
    for name, data in hand_made_archives():
        writer.put("zip_reader", name + ".pt", data)
        writer.put("checkpoint_interpreter", name + ".pt", data)
    for name, data in generic_pickles():
        writer.put("pickle", name + ".pkl", data)
    for name, data in deepspeed_like_pickles():
        if not name.startswith("pair-"):
            writer.put("pickle", name + ".pkl", data)
        writer.put("checkpoint_interpreter", name + ".pkl", data)
    for target, count in sorted(writer.count.items()):
        print("%s: %d seeds" % (target, count))


if __name__ == "__main__":
    main()
