"""lazy_mode=True: LazyTensor placeholders as DeepSpeed's lazy state dicts hold them, each read
alone by contiguous(); to_torch_tensor on lazy and plain dicts; the input CRC check when the
tensors come one at a time."""

from collections import OrderedDict

import pytest
import torch

import zero2fp32
from conftest import DEEPSPEED, damage_record, same_bits


def test_lazy_tensors_have_shape_dtype_and_read_alone():
    folder = DEEPSPEED / "z3_ws2_tied_fp32"
    eager = zero2fp32.get_fp32_state_dict_from_zero_checkpoint(folder)
    lazy = zero2fp32.get_fp32_state_dict_from_zero_checkpoint(folder, lazy_mode=True)
    assert type(lazy) is OrderedDict
    assert list(lazy) == list(eager)
    assert lazy["lm_head.weight"] is lazy["embed.weight"]
    for name, value in lazy.items():
        assert isinstance(value, zero2fp32.LazyTensor)
        assert isinstance(value.shape, torch.Size) and value.shape == eager[name].shape
        assert value.dtype == eager[name].dtype
        assert value.numel() == eager[name].numel() and value.dim() == eager[name].dim()
        tensor = value.contiguous()
        assert isinstance(tensor, torch.Tensor) and same_bits(tensor, eager[name])
        assert value.contiguous() is not tensor  # a new tensor at every read


def test_to_torch_tensor_keeps_shared_values_shared():
    folder = DEEPSPEED / "z3_ws2_tied_fp32"
    lazy = zero2fp32.get_fp32_state_dict_from_zero_checkpoint(folder, lazy_mode=True)
    tensors = zero2fp32.to_torch_tensor(lazy)
    assert type(tensors) is dict and list(tensors) == list(lazy)
    assert tensors["lm_head.weight"] is tensors["embed.weight"]
    empty = zero2fp32.to_torch_tensor(lazy, return_empty_tensor=True)
    assert empty["lm_head.weight"] is empty["embed.weight"]
    for name, value in lazy.items():
        assert empty[name].shape == value.shape and empty[name].dtype == value.dtype
    # A plain dict (DeepSpeed's zero2 lazy values are tensors): values as they are.
    plain = {"a": torch.ones(2), "b": torch.zeros(3)}
    plain["c"] = plain["a"]
    converted = zero2fp32.to_torch_tensor(plain)
    assert converted["a"] is plain["a"] and converted["c"] is converted["a"]


def test_a_lazy_read_reads_only_its_tensor(copy_fixture):
    # ZeRO-2 with frozen parameters: buffers and frozen parameters are in the model file only,
    # the trainable ones in the optimizer files.
    folder = copy_fixture(DEEPSPEED / "z2_ws2_frozen_bf16")
    lazy = zero2fp32.get_fp32_state_dict_from_zero_checkpoint(folder, lazy_mode=True)
    roles = {t.name: t.role for t in zero2fp32.plan(folder).tensors}
    for optimizer_file in (folder / "global_step2").glob("*optim_states.pt"):
        optimizer_file.unlink()
    expected = torch.load(DEEPSPEED / "z2_ws2_frozen_bf16/ref/bin/pytorch_model.bin")
    for name, value in lazy.items():
        if roles[name] in ("buffer", "frozen"):
            assert same_bits(value.contiguous(), expected[name]), name
        else:
            with pytest.raises(zero2fp32.Error, match="optim_states.pt"):
                value.contiguous()


def test_a_damaged_record_fails_the_read_that_completes_it(copy_fixture):
    folder = copy_fixture(DEEPSPEED / "z3_ws2_fp32")
    damaged = damage_record(folder, "zero_pp_rank_1_*optim_states.pt", "/data/3")
    with pytest.raises(zero2fp32.InputError, match="CRC-32") as failure:
        zero2fp32.get_fp32_state_dict_from_zero_checkpoint(folder)
    assert str(damaged) in str(failure.value)
    lazy = zero2fp32.get_fp32_state_dict_from_zero_checkpoint(folder, lazy_mode=True)
    failed = []
    for name, value in lazy.items():
        try:
            value.contiguous()
        except zero2fp32.InputError as error:
            assert str(damaged) in str(error)
            failed.append(name)
    assert len(failed) == 1  # the read that completed the record; the others came before it
    unchecked = zero2fp32.get_fp32_state_dict_from_zero_checkpoint(folder, input_crc=False)
    assert len(unchecked) == len(lazy)
