"""The state dicts against the live engine's weights (expected.pt), on every bundled checkpoint,
those DeepSpeed's zero_to_fp32 cannot read included (BF16_Optimizer, tensor/pipeline/expert
parallel, universal checkpoints): with the converter's own defaults (parity=False) every tensor
bit-exact in its own dtype; with DeepSpeed's (the default) the same values in DeepSpeed's dtypes;
and the converter's tensor options (dtype, include/exclude, strip_prefix)."""

import pytest
import torch

import zero2fp32
from conftest import (DEEPSPEED, FIXTURES, GENERATED, GENERATED_FIXTURES, NEWEST, NEWEST_FIXTURES,
                      PARALLEL, PARALLEL_FIXTURES, expected_state_dict, same_bits)

FOLDERS = ([DEEPSPEED / f for f in FIXTURES] + [NEWEST / f for f in NEWEST_FIXTURES] +
           [PARALLEL / f for f in PARALLEL_FIXTURES] + [GENERATED / f for f in GENERATED_FIXTURES])


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: p.name)
def test_the_converters_tensors_are_the_engines(folder):
    expected = expected_state_dict(folder)
    meta = torch.load(folder / "expected.pt")["meta"]
    # 16-bit masters (no fp32 copy): the engine's are 16-bit, the converter's output is fp32.
    lowp = meta.get("master_dtype", "float32") != "float32"
    ours = zero2fp32.get_fp32_state_dict_from_zero_checkpoint(folder, parity=False)
    assert sorted(ours) == sorted(expected)
    for name, tensor in expected.items():
        if lowp and tensor.is_floating_point():
            assert ours[name].dtype == torch.float32, name
            assert same_bits(ours[name].to(tensor.dtype), tensor), name
        else:
            assert same_bits(ours[name], tensor), name
    for alias, owner in (meta.get("tied") or {}).items():
        assert ours[alias] is ours[owner]


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: p.name)
def test_deepspeeds_dtypes_hold_the_engines_values(folder):
    expected = expected_state_dict(folder)
    ours = zero2fp32.get_fp32_state_dict_from_zero_checkpoint(folder)
    checkpoint = zero2fp32.plan(folder, parity=True)
    roles = {tensor.name: tensor.role for tensor in checkpoint.tensors}
    stored = {tensor.name: tensor.source_dtype for tensor in checkpoint.tensors}
    assert list(ours) == [tensor.name for tensor in checkpoint.tensors]
    for name, tensor in ours.items():
        if roles[name] == "buffer" or tensor.dtype == torch.float32:
            assert tensor.dtype == torch.float32, name  # zero_to_fp32's .float() of buffers
        else:
            # Frozen parameters and 16-bit masters: in their stored dtype.
            assert roles[name] in ("frozen", "trainable"), name
            assert str(tensor.dtype) == "torch." + stored[name], name
        assert same_bits(tensor.to(expected[name].dtype), expected[name]), name


@pytest.mark.parametrize("name", ["z2_ws2_tied_fp32", "z3_ws2_fp32", "z3_ws2_bf16"])
def test_universal_checkpoints(name, universal_checkpoint):
    expected = expected_state_dict(DEEPSPEED / name)
    ours = zero2fp32.get_fp32_state_dict_from_zero_checkpoint(universal_checkpoint(name),
                                                              parity=False)
    for tensor_name, tensor in expected.items():
        if tensor_name in ours:
            assert same_bits(ours[tensor_name], tensor), tensor_name
    # Universal checkpoints hold the trainable parameters (buffers stay in the model files).
    trainable = [t.name for t in zero2fp32.plan(DEEPSPEED / name).tensors if t.role == "trainable"]
    assert set(trainable) <= set(ours)


@pytest.mark.parametrize("dtype", ["bf16", torch.bfloat16, torch.float16])
def test_output_dtype_is_torchs_rounding(dtype):
    folder = DEEPSPEED / "z3_ws2_bf16"
    half = torch.bfloat16 if dtype in ("bf16", torch.bfloat16) else torch.float16
    ours = zero2fp32.get_fp32_state_dict_from_zero_checkpoint(folder, dtype=dtype, parity=False)
    for name, tensor in expected_state_dict(folder).items():
        want = tensor.to(half) if tensor.is_floating_point() else tensor
        assert same_bits(ours[name], want), name


def test_selection_and_names():
    folder = DEEPSPEED / "z3_ws2_tied_fp32"
    everything = zero2fp32.get_fp32_state_dict_from_zero_checkpoint(folder)
    picked = zero2fp32.get_fp32_state_dict_from_zero_checkpoint(folder, include="^proj\\.",
                                                                exclude=["bias"])
    assert list(picked) == ["proj.weight"]
    assert same_bits(picked["proj.weight"], everything["proj.weight"])
    renamed = zero2fp32.get_fp32_state_dict_from_zero_checkpoint(folder, strip_prefix="proj.")
    assert "weight" in renamed and "bias" in renamed and "proj.weight" not in renamed
    untied = zero2fp32.get_fp32_state_dict_from_zero_checkpoint(folder, untie=True)
    assert untied["lm_head.weight"] is not untied["embed.weight"]
    assert same_bits(untied["lm_head.weight"], untied["embed.weight"])


def test_threads_and_read_modes_give_the_same_tensors():
    folder = DEEPSPEED / "z3_ws4_fp32"
    one = zero2fp32.get_fp32_state_dict_from_zero_checkpoint(folder, threads=1)
    for options in ({"threads": 3, "block_size": "4KiB"}, {"read_mode": "direct"},
                    {"read_mode": "buffered", "buffer_size": "64KiB", "threads": 2}):
        other = zero2fp32.get_fp32_state_dict_from_zero_checkpoint(folder, **options)
        for name, tensor in one.items():
            assert same_bits(other[name], tensor), (options, name)
