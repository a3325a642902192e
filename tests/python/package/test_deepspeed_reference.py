"""The drop-ins against DeepSpeed's own outputs: on every fixture where DeepSpeed's zero_to_fp32
succeeded, the state dict it wrote (ref/) and ours have the same keys in the same order,
dtypes, shapes, bytes and tied tensors; convert_zero_checkpoint_to_fp32_state_dict writes
byte-identical safetensors files and index, and .bin files with the same contents.

References: tests/data/deepspeed/*/ref (DeepSpeed 0.14.5's checkpoints, the newest
zero_to_fp32.py) and tests/data/deepspeed-newest/*/ref/zero_to_fp32 (DeepSpeed 0.19.6).
"""

import json

import pytest
import torch

import zero2fp32
from conftest import (DEEPSPEED, FIXTURES, NEWEST, NEWEST_FIXTURES, read_safetensors, same_bits,
                      tied_pairs)

# (fixture, reference file, the arguments DeepSpeed was run with), tests/data/deepspeed/FIXTURES.md
BIN_CASES = [(f, "bin", {}) for f in FIXTURES if (DEEPSPEED / f / "ref/bin").is_dir()]
BIN_CASES += [(f, "exclude_frozen", {"exclude_frozen_parameters": True})
              for f in FIXTURES if (DEEPSPEED / f / "ref/exclude_frozen").is_dir()]
BIN_CASES += [(f, "tag1", {"tag": "global_step1"})
              for f in FIXTURES if (DEEPSPEED / f / "ref/tag1").is_dir()]


def expect_same_state_dict(ours, theirs):
    assert list(ours) == list(theirs)
    for name, tensor in theirs.items():
        assert same_bits(ours[name], tensor), name
    assert tied_pairs(ours) == tied_pairs(theirs)


@pytest.mark.parametrize("fixture,variant,arguments", BIN_CASES)
def test_state_dict_is_zero_to_fp32s(fixture, variant, arguments):
    theirs = torch.load(DEEPSPEED / fixture / "ref" / variant / "pytorch_model.bin")
    ours = zero2fp32.get_fp32_state_dict_from_zero_checkpoint(DEEPSPEED / fixture, **arguments)
    assert type(ours) is dict  # DeepSpeed's to_torch_tensor builds a plain dict
    expect_same_state_dict(ours, theirs)


@pytest.mark.parametrize("fixture,variant,arguments", BIN_CASES)
def test_lazy_state_dict_is_zero_to_fp32s(fixture, variant, arguments):
    theirs = torch.load(DEEPSPEED / fixture / "ref" / variant / "pytorch_model.bin")
    lazy = zero2fp32.get_fp32_state_dict_from_zero_checkpoint(DEEPSPEED / fixture,
                                                               lazy_mode=True, **arguments)
    assert list(lazy) == list(theirs)
    for name, tensor in theirs.items():
        assert lazy[name].shape == tensor.shape and lazy[name].dtype == tensor.dtype, name
    expect_same_state_dict(zero2fp32.to_torch_tensor(lazy), theirs)
    one_by_one = {name: value.contiguous() for name, value in lazy.items()}
    for name, tensor in theirs.items():
        assert same_bits(one_by_one[name], tensor), name


# The newest fixtures where DeepSpeed's zero_to_fp32.py succeeded (its output in
# ref/zero_to_fp32/); where it failed (ref/zero_to_fp32.FAILED.txt), the engine's weights are the
# reference (test_engine_weights.py).
NEWEST_REFERENCED = [f for f in NEWEST_FIXTURES
                     if (NEWEST / f / "ref/zero_to_fp32/model.safetensors").is_file()]


def test_newest_references_are_there():
    assert {"z3_ws3_bf16", "lowp_z3_ws2_bf16", "muon_z1_ws2_fp32"} <= set(NEWEST_REFERENCED)
    for fixture in set(NEWEST_FIXTURES) - set(NEWEST_REFERENCED):
        assert (NEWEST / fixture / "ref/zero_to_fp32.FAILED.txt").is_file(), fixture


@pytest.mark.parametrize("fixture", NEWEST_REFERENCED)
def test_newest_deepspeeds_state_dict(fixture):
    theirs, _ = read_safetensors(NEWEST / fixture / "ref/zero_to_fp32/model.safetensors")
    ours = zero2fp32.get_fp32_state_dict_from_zero_checkpoint(NEWEST / fixture)
    assert sorted(ours) == sorted(theirs)  # safetensors keeps no order
    for name, tensor in theirs.items():
        assert same_bits(ours[name], tensor), name


# The converter writes every floating tensor in the output dtype (fp32), where DeepSpeed keeps
# 16-bit masters 16-bit: only the state dicts (above) keep them (keep_master_dtype).
FILE_CASES = [pytest.param(f, marks=pytest.mark.xfail(
    strict=True, reason="files hold fp32 where DeepSpeed keeps 16-bit masters"))
    if f.startswith("lowp") else f for f in NEWEST_REFERENCED]


@pytest.mark.parametrize("fixture", FILE_CASES)
def test_newest_deepspeeds_file(fixture, tmp_path):
    zero2fp32.convert_zero_checkpoint_to_fp32_state_dict(NEWEST / fixture, tmp_path,
                                                         safe_serialization=True)
    reference = NEWEST / fixture / "ref/zero_to_fp32/model.safetensors"
    assert (tmp_path / "model.safetensors").read_bytes() == reference.read_bytes()


def reference_dirs(kind):
    return [(f, d.name) for f in FIXTURES for d in sorted((DEEPSPEED / f / "ref").glob(kind))]


# --safe_serialization with the shard size each reference was made with
# (tests/data/deepspeed/FIXTURES.md).
SAFETENSORS_CASES = [(f, "safetensors", "5GB") for f, _ in reference_dirs("safetensors")]
SAFETENSORS_CASES += [(f, "sharded_safetensors", "10KB" if f == "z3_ws4_fp32" else "5KB")
                      for f, _ in reference_dirs("sharded_safetensors")]


@pytest.mark.parametrize("fixture,variant,shard", SAFETENSORS_CASES)
def test_safetensors_files_are_zero_to_fp32s_bytes(fixture, variant, shard, tmp_path):
    zero2fp32.convert_zero_checkpoint_to_fp32_state_dict(DEEPSPEED / fixture, tmp_path,
                                                         max_shard_size=shard,
                                                         safe_serialization=True)
    reference = DEEPSPEED / fixture / "ref" / variant
    names = sorted(p.name for p in reference.iterdir())
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == names
    for name in names:
        assert (tmp_path / name).read_bytes() == (reference / name).read_bytes(), name


BIN_FILE_CASES = [(f, "bin", "5GB", {}) for f, _ in reference_dirs("bin")]
BIN_FILE_CASES += [(f, "sharded_bin", "5KB", {}) for f, _ in reference_dirs("sharded_bin")]
BIN_FILE_CASES += [(f, "exclude_frozen", "5GB", {"exclude_frozen_parameters": True})
                   for f, _ in reference_dirs("exclude_frozen")]


@pytest.mark.parametrize("fixture,variant,shard,arguments", BIN_FILE_CASES)
def test_bin_files_hold_zero_to_fp32s_tensors(fixture, variant, shard, arguments, tmp_path):
    zero2fp32.convert_zero_checkpoint_to_fp32_state_dict(DEEPSPEED / fixture, tmp_path,
                                                         max_shard_size=shard, **arguments)
    reference = DEEPSPEED / fixture / "ref" / variant
    names = sorted(p.name for p in reference.iterdir())
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == names
    for name in names:
        if name.endswith(".json"):
            assert json.loads((tmp_path / name).read_text()) == \
                json.loads((reference / name).read_text())
        else:
            expect_same_state_dict(torch.load(tmp_path / name), torch.load(reference / name))


def test_a_second_run_replaces_the_files_as_deepspeeds_does(tmp_path):
    for _ in range(2):
        zero2fp32.convert_zero_checkpoint_to_fp32_state_dict(DEEPSPEED / "z2_ws2_fp32", tmp_path)
    expect_same_state_dict(torch.load(tmp_path / "pytorch_model.bin"),
                           torch.load(DEEPSPEED / "z2_ws2_fp32/ref/bin/pytorch_model.bin"))
