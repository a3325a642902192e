"""Errors as Python exceptions: the library's kind (zero2fp32.Error.kind) and message, naming
the file and what was expected; each kind also the built-in exception DeepSpeed's callers
catch."""

import pytest
import torch

import zero2fp32
from conftest import DEEPSPEED, damage_record


def test_kinds_are_builtin_exceptions_too():
    assert issubclass(zero2fp32.InputError, ValueError)
    assert issubclass(zero2fp32.UsageError, ValueError)
    assert issubclass(zero2fp32.UnsupportedError, NotImplementedError)
    assert issubclass(zero2fp32.IoError, OSError)
    assert issubclass(zero2fp32.OutputError, OSError)
    assert issubclass(zero2fp32.Interrupted, KeyboardInterrupt)
    for cls in (zero2fp32.InputError, zero2fp32.UsageError, zero2fp32.Interrupted):
        assert issubclass(cls, zero2fp32.Error)


def test_a_missing_folder(tmp_path):
    with pytest.raises(zero2fp32.Error) as failure:
        zero2fp32.get_fp32_state_dict_from_zero_checkpoint(tmp_path / "nowhere")
    assert str(tmp_path / "nowhere") in str(failure.value)
    assert failure.value.kind in ("input", "usage")


def test_a_folder_without_a_checkpoint(tmp_path):
    with pytest.raises(zero2fp32.Error) as failure:
        zero2fp32.get_fp32_state_dict_from_zero_checkpoint(tmp_path)
    assert str(tmp_path) in str(failure.value)


def test_a_truncated_optimizer_file(copy_fixture):
    folder = copy_fixture(DEEPSPEED / "z3_ws2_fp32")
    optimizer = sorted((folder / "global_step2").glob("*optim_states.pt"))[0]
    optimizer.write_bytes(optimizer.read_bytes()[:-200])
    with pytest.raises(zero2fp32.InputError) as failure:
        zero2fp32.get_fp32_state_dict_from_zero_checkpoint(folder)
    assert optimizer.name in str(failure.value)
    assert failure.value.kind == "input"


def test_a_damaged_record(copy_fixture):
    folder = copy_fixture(DEEPSPEED / "z2_ws2_fp32")
    damaged = damage_record(folder, "zero_pp_rank_0_*optim_states.pt", "/data/3")
    with pytest.raises(zero2fp32.InputError, match="fails its CRC-32 check") as failure:
        zero2fp32.get_fp32_state_dict_from_zero_checkpoint(folder)
    assert str(damaged) in str(failure.value)
    with pytest.raises(zero2fp32.InputError, match="CRC-32"):
        zero2fp32.convert(folder, folder.parent / "out")


def test_bad_options():
    folder = DEEPSPEED / "z3_ws2_fp32"
    with pytest.raises(zero2fp32.UsageError, match="--dtype") as failure:
        zero2fp32.get_fp32_state_dict_from_zero_checkpoint(folder, dtype="fp8")
    assert failure.value.kind == "usage"
    with pytest.raises(ValueError):
        zero2fp32.get_fp32_state_dict_from_zero_checkpoint(folder, include="(")
    with pytest.raises(TypeError, match="no_such_option"):
        zero2fp32.get_fp32_state_dict_from_zero_checkpoint(folder, no_such_option=1)
    with pytest.raises(TypeError, match="format"):
        zero2fp32.get_fp32_state_dict_from_zero_checkpoint(folder, format="torch")
    with pytest.raises(zero2fp32.UsageError):
        zero2fp32.convert(folder, "/tmp/unused", max_shard_size="0")


def test_an_existing_output_is_not_overwritten_by_convert(tmp_path):
    folder = DEEPSPEED / "z3_ws2_fp32"
    zero2fp32.convert(folder, tmp_path)
    with pytest.raises(zero2fp32.OutputError, match="overwrite"):
        zero2fp32.convert(folder, tmp_path)
    zero2fp32.convert(folder, tmp_path, overwrite=True)


def test_memory_of_the_wrong_size_is_refused():
    checkpoint = zero2fp32.Checkpoint(DEEPSPEED / "z3_ws2_fp32")
    small = torch.empty(3, dtype=torch.uint8)
    with pytest.raises(zero2fp32.UsageError, match="holds 3 bytes"):
        checkpoint._reader.read([(0, small.data_ptr(), 3, None)])
    tensor = checkpoint.empty(2)
    size = tensor.numel() * tensor.element_size()
    with pytest.raises(zero2fp32.UsageError, match="asked for twice"):
        checkpoint._reader.read([(2, tensor.data_ptr(), size, None),
                                 (2, tensor.data_ptr(), size, None)])
    with pytest.raises(zero2fp32.UsageError, match="cannot be read as int64"):
        checkpoint._reader.read([(2, tensor.data_ptr(), size * 2, "int64")])
