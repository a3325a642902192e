"""Shared pieces of the Python package's tests (run by CTest: tests/CMakeLists.txt).

Environment: PYTHONPATH holds the package built in the build tree (<build>/python),
Z2F_TEST_DATA the bundled fixtures (tests/data), Z2F_BIN the zero2fp32-mpi executable.
"""

import json
import os
import shutil
import struct
import zipfile
from collections import OrderedDict
from pathlib import Path

import pytest
import torch

DATA = Path(os.environ.get("Z2F_TEST_DATA", Path(__file__).resolve().parents[2] / "data"))
DEEPSPEED = DATA / "deepspeed"
NEWEST = DATA / "deepspeed-newest"
GENERATED = DATA / "deepspeed-generated"
PARALLEL = DATA / "deepspeed-parallel"
UNIVERSAL = DATA / "universal"

# Every fixture of tests/data/deepspeed (tests/data/deepspeed/FIXTURES.md).
FIXTURES = sorted(p.name for p in DEEPSPEED.iterdir() if (p / "latest").is_file())
PARALLEL_FIXTURES = sorted(p.name for p in PARALLEL.iterdir() if (p / "latest").is_file())
NEWEST_FIXTURES = sorted(p.name for p in NEWEST.iterdir() if (p / "latest").is_file())
GENERATED_FIXTURES = sorted(p.name for p in GENERATED.iterdir() if (p / "latest").is_file())

_SAFETENSORS_DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16,
                       "BF16": torch.bfloat16, "I64": torch.int64, "I32": torch.int32,
                       "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8, "BOOL": torch.bool}


def expected_state_dict(folder: Path) -> "OrderedDict[str, torch.Tensor]":
    """The live engine's weights (expected.pt of a fixture)."""
    return torch.load(folder / "expected.pt", map_location="cpu")["state_dict"]


def read_safetensors(path: Path):
    """(tensors by name, __metadata__) of a safetensors file, read with the standard library
    and torch (Debian has no safetensors package)."""
    raw = path.read_bytes()
    (length,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + length])
    metadata = header.pop("__metadata__", {})
    data = raw[8 + length:]
    tensors = {}
    for name, entry in header.items():
        begin, end = entry["data_offsets"]
        dtype = _SAFETENSORS_DTYPES[entry["dtype"]]
        flat = torch.frombuffer(bytearray(data[begin:end]) or bytearray(1), dtype=torch.uint8)
        tensors[name] = flat[:end - begin].view(dtype).reshape(entry["shape"])
    return tensors, metadata


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Same dtype, shape and bytes (NaNs included)."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    return torch.equal(a.contiguous().view(-1).view(torch.uint8),
                       b.contiguous().view(-1).view(torch.uint8))


def tied_pairs(state_dict) -> set:
    """The (alias, owner) name pairs of tensors that are one tensor: the same object in our
    dicts; in a torch.load'ed file, the same storage, offset and shape."""
    pairs = set()
    names = list(state_dict)
    for i, a in enumerate(names):
        for b in names[:i]:
            x, y = state_dict[a], state_dict[b]
            if x is y or (x.numel() > 0 and x.data_ptr() == y.data_ptr() and x.shape == y.shape):
                pairs.add((a, b))
    return pairs


def damage_record(checkpoint: Path, file_glob: str, record: str) -> Path:
    """Flips one byte in the middle of zip record `record` (its name ends so) of the first file
    matching `file_glob` in the checkpoint's tag folder; returns that file."""
    path = sorted((checkpoint / (checkpoint / "latest").read_text().strip()).glob(file_glob))[0]
    with zipfile.ZipFile(path) as archive:
        info = next(i for i in archive.infolist() if i.filename.endswith(record))
    with open(path, "r+b") as f:
        f.seek(info.header_offset)
        header = f.read(30)
        name_length, extra_length = struct.unpack("<HH", header[26:30])
        at = info.header_offset + 30 + name_length + extra_length + info.file_size // 2
        f.seek(at)
        byte = f.read(1)
        f.seek(at)
        f.write(bytes([byte[0] ^ 1]))
    return path


@pytest.fixture
def copy_fixture(tmp_path):
    """A writable copy of a fixture folder."""

    def copy(folder: Path) -> Path:
        target = tmp_path / folder.name
        shutil.copytree(folder, target)
        return target

    return copy


@pytest.fixture
def universal_checkpoint(tmp_path):
    """DeepSpeed's universal checkpoint of a fixture (tests/data/universal) made whole: the
    model-states files its converter copies, put back (tests/data/universal/README.md)."""

    def assemble(name: str) -> Path:
        target = tmp_path / ("universal_" + name)
        shutil.copytree(UNIVERSAL / name, target)
        tag = (target / "latest_universal").read_text().strip()
        for model_states in (DEEPSPEED / name / "global_step2").glob("*model_states.pt"):
            shutil.copy(model_states, target / tag / model_states.name)
        return target

    return assemble
