"""load_state_dict_from_zero_checkpoint on small torch.nn models shaped like the fixtures'
(tests/data/deepspeed/FIXTURES.md): the model comes back on the CPU holding the engine's
weights."""

import torch
from torch import nn

import zero2fp32
from conftest import DEEPSPEED, expected_state_dict, same_bits


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.zeros(1))
        self.temp = nn.Parameter(torch.zeros(()))
        self.fc1 = nn.Linear(37, 53)
        self.fc2 = nn.Linear(53, 29)
        self.norm = nn.LayerNorm(29)


class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(101, 24)
        self.proj = nn.Linear(24, 24)
        self.lm_head = nn.Linear(24, 101, bias=False)
        self.lm_head.weight = self.embed.weight
        self.register_buffer("pos_scale", torch.zeros(24))
        self.register_buffer("position_ids", torch.zeros(7, dtype=torch.int64))
        self.register_buffer("scratch", torch.zeros(3), persistent=False)


def test_mlp():
    for fixture in ("z2_ws2_fp32", "z3_ws2_bf16", "z1_ws2_bf16opt"):
        model = zero2fp32.load_state_dict_from_zero_checkpoint(Mlp(), DEEPSPEED / fixture)
        assert isinstance(model, Mlp)
        for name, tensor in expected_state_dict(DEEPSPEED / fixture).items():
            assert same_bits(model.state_dict()[name], tensor), (fixture, name)


def test_tied_model_keeps_its_tie():
    model = zero2fp32.load_state_dict_from_zero_checkpoint(Tied(), DEEPSPEED / "z3_ws2_tied_fp32")
    expected = expected_state_dict(DEEPSPEED / "z3_ws2_tied_fp32")
    state = model.state_dict()
    for name, tensor in expected.items():
        assert same_bits(state[name], tensor), name
    assert model.lm_head.weight is model.embed.weight
    assert model.position_ids.dtype == torch.int64
