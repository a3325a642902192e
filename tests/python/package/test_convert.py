"""zero2fp32.convert() and plan() (the command line's options and results), python -m zero2fp32
(the command line itself, in one process), the zero_to_fp32 command line, and the
interpreter's own signal handlers after a conversion."""

import os
import shutil
import signal
import subprocess
import sys

import pytest

import zero2fp32
from conftest import DEEPSPEED, damage_record, read_safetensors, same_bits

ENV = dict(os.environ)


def run(*arguments, env=None):
    return subprocess.run([sys.executable, *arguments], capture_output=True, text=True,
                          env=env or ENV, timeout=120)


def test_convert_returns_what_it_did(tmp_path):
    result = zero2fp32.convert(DEEPSPEED / "z3_ws4_fp32", tmp_path, max_shard_size="10KB",
                               parity=True)
    assert isinstance(result, zero2fp32.Result)
    assert [f.name for f in result.files] == [name for name, _ in result.plan.files]
    assert all(f.complete for f in result.files)
    assert result.plan.index == "model.safetensors.index.json"
    assert result.bytes_read > 0 and result.wall_seconds > 0
    reference = DEEPSPEED / "z3_ws4_fp32/ref/sharded_safetensors"
    for entry in reference.iterdir():
        assert (tmp_path / entry.name).read_bytes() == entry.read_bytes(), entry.name


def test_plan_lists_the_tensors_of_the_state_dict():
    folder = DEEPSPEED / "z3_ws2_tied_fp32"
    plan = zero2fp32.plan(folder, format="torch", parity=True)
    assert plan.zero_stage == 3 and plan.world_size == 2 and plan.tag == "global_step2"
    assert plan.files == [("pytorch_model.bin", plan.files[0][1])]
    state_dict = zero2fp32.get_fp32_state_dict_from_zero_checkpoint(folder)
    assert [t.name for t in plan.tensors] == list(state_dict)
    assert [t.dtype for t in plan.tensors] == [str(v.dtype)[6:] for v in state_dict.values()]
    alias = plan.tensors[-1]
    assert alias.role == "alias" and alias.alias_of == "embed.weight"


def test_tied_weights_in_safetensors_where_deepspeed_fails(tmp_path):
    zero2fp32.convert_zero_checkpoint_to_fp32_state_dict(DEEPSPEED / "z3_ws2_tied_fp32",
                                                         tmp_path, safe_serialization=True)
    tensors, metadata = read_safetensors(tmp_path / "model.safetensors")
    assert "lm_head.weight" not in tensors and metadata["lm_head.weight"] == "embed.weight"
    ours = zero2fp32.get_fp32_state_dict_from_zero_checkpoint(DEEPSPEED / "z3_ws2_tied_fp32")
    assert same_bits(tensors["embed.weight"], ours["lm_head.weight"])


def test_python_m_zero2fp32_is_the_command_line(tmp_path):
    folder = DEEPSPEED / "z3_ws2_bf16"
    done = run("-m", "zero2fp32", str(folder), str(tmp_path / "py"), "--dtype", "bf16", "-q")
    assert done.returncode == 0, done.stderr
    binary = os.environ.get("Z2F_BIN")
    if binary:
        cli = subprocess.run([binary, str(folder), str(tmp_path / "cli"), "--dtype", "bf16", "-q"],
                             capture_output=True, text=True, timeout=120)
        assert cli.returncode == 0, cli.stderr
        assert (tmp_path / "py/model.safetensors").read_bytes() == \
            (tmp_path / "cli/model.safetensors").read_bytes()
    usage = run("-m", "zero2fp32", str(folder), str(tmp_path / "x"), "--dtype", "fp8")
    assert usage.returncode == 2 and "--dtype" in usage.stderr
    assert run("-m", "zero2fp32", "--version").stdout.startswith("zero2fp32-mpi ")
    launched = run("-m", "zero2fp32", str(folder), str(tmp_path / "y"),
                   env=dict(ENV, OMPI_COMM_WORLD_SIZE="4"))
    assert launched.returncode == 2 and "zero2fp32-mpi" in launched.stderr
    assert not (tmp_path / "y").exists()


def test_zero_to_fp32_command_line(tmp_path):
    folder = DEEPSPEED / "z3_ws2_fp32"
    done = run("-m", "zero2fp32.zero_to_fp32", str(folder), str(tmp_path), "--safe_serialization")
    assert done.returncode == 0, done.stderr
    reference = folder / "ref/safetensors/model.safetensors"
    assert (tmp_path / "model.safetensors").read_bytes() == reference.read_bytes()
    # A path that is no checkpoint is a usage error (README.md, "Exit codes"), a damaged one a
    # conversion error.
    failed = run("-m", "zero2fp32.zero_to_fp32", str(tmp_path / "none"), str(tmp_path / "o"))
    assert failed.returncode == 2 and "zero_to_fp32: error:" in failed.stderr
    damaged = tmp_path / "damaged"
    shutil.copytree(folder, damaged)
    damage_record(damaged, "zero_pp_rank_0_*optim_states.pt", "/data/3")
    failed = run("-m", "zero2fp32.zero_to_fp32", str(damaged), str(tmp_path / "o"))
    assert failed.returncode == 1 and "CRC-32" in failed.stderr


def test_the_interpreters_ctrl_c_survives_a_conversion(tmp_path):
    before = signal.getsignal(signal.SIGINT)
    zero2fp32.convert(DEEPSPEED / "z3_ws2_fp32", tmp_path)
    assert signal.getsignal(signal.SIGINT) is before
    with pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(1000):  # the handler runs between two bytecodes
            pass
    # The converter forgot the signal: the next conversion runs.
    zero2fp32.convert(DEEPSPEED / "z3_ws2_fp32", tmp_path / "again")
