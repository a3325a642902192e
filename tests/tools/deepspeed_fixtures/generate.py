#!/usr/bin/env python3
"""Writes a real DeepSpeed checkpoint of a tiny model and the live engine's weights beside it
(tests/data/deepspeed-generated; README.md here says where it runs: Debian 13's torch 2.6 and
DeepSpeed 0.19.6 on CPU, one process per rank over gloo).

Writes <out>/{latest, <tag>/..., expected.pt, meta.json}.
expected.pt = {"state_dict": OrderedDict(name -> fp32 tensor, model.state_dict() order), "meta": {...}}
 - trainable params: deepspeed.utils.safe_get_full_fp32_param (stage 0: the fp16/bf16 optimizer's fp32 copies),
   merged over TP (AutoTP) / gathered over EP (AutoEP) to the full shape;
 - frozen params and buffers: from the module.
meta.json records these arguments, the DeepSpeed configuration and what the engine was.
"""
import argparse, json, os, re, sys, time, copy, shutil
from collections import OrderedDict

os.environ.setdefault("DS_ACCELERATOR", "cpu")


def parse():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--kind", default="plain", choices=["plain", "autotp", "autoep", "ulysses"])
    ap.add_argument("--stage", type=int, default=2)
    ap.add_argument("--world-size", type=int, default=2)
    ap.add_argument("--dtype", default="fp32", choices=["fp32", "bf16", "fp16"])
    ap.add_argument("--tp", type=int, default=0)
    ap.add_argument("--ep", type=int, default=0)
    ap.add_argument("--sp", type=int, default=0)
    ap.add_argument("--lowp", action="store_true", help="bf16_master_weights_and_grads + bf16_optimizer_states")
    ap.add_argument("--no-serialization", action="store_true")
    ap.add_argument("--zero-init", action="store_true")
    ap.add_argument("--two-groups", action="store_true")
    ap.add_argument("--fake-fused", action="store_true",
                    help="fp16 stage 0: client optimizer subclassing deepspeed FusedAdam (but stepping torch AdamW) so the engine builds the fused FP16_Optimizer")
    ap.add_argument("--frozen", action="store_true", help="freeze one parameter and add a buffer")
    ap.add_argument("--grad-accum-fp32", action="store_true", help='"data_types": {"grad_accum_dtype": "fp32"} (bf16 + stage 1 -> BF16_Optimizer)')
    ap.add_argument("--load-universal", default="", help="instead of training: load this universal checkpoint dir and compare with --out/expected.pt")
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--port", type=int, default=0)
    return ap.parse_args()


# ---------------------------------------------------------------- models
def build_model(kind, args):
    import torch, torch.nn as nn, torch.nn.functional as F
    torch.manual_seed(1234)
    if kind in ("plain", "ulysses"):

        class MLP(nn.Module):

            def __init__(self):
                super().__init__()
                self.scale = nn.Parameter(torch.ones(1) * 1.5)
                self.temp = nn.Parameter(torch.tensor(0.7))
                self.fc1 = nn.Linear(37, 53)
                self.fc2 = nn.Linear(53, 29)
                self.norm = nn.LayerNorm(29)
                if args.frozen:
                    self.register_buffer("running", torch.arange(7, dtype=torch.float32) * 0.25)
                    self.fc2.bias.requires_grad_(False)

            def forward(self, x, y):
                h = self.fc2(F.gelu(self.fc1(x)))
                h = self.norm(h) * self.scale * self.temp
                return ((h.float() - y.float())**2).mean()

        return MLP()
    if kind == "autotp":

        class Attn(nn.Module):

            def __init__(self, d):
                super().__init__()
                self.q_proj = nn.Linear(d, d)
                self.k_proj = nn.Linear(d, d)
                self.v_proj = nn.Linear(d, d)
                self.o_proj = nn.Linear(d, d)

            def forward(self, x):
                B, T, _ = x.shape
                hd = 8
                q = self.q_proj(x).view(B, T, -1, hd).transpose(1, 2)
                k = self.k_proj(x).view(B, T, -1, hd).transpose(1, 2)
                v = self.v_proj(x).view(B, T, -1, hd).transpose(1, 2)
                a = torch.softmax((q @ k.transpose(-1, -2)) / hd**0.5 +
                                  torch.triu(torch.full((T, T), -1e4, dtype=q.dtype), 1), dim=-1)
                o = (a @ v).transpose(1, 2).reshape(B, T, -1)
                return self.o_proj(o)

        class MLPsep(nn.Module):

            def __init__(self, d, f):
                super().__init__()
                self.gate_proj = nn.Linear(d, f, bias=False)
                self.up_proj = nn.Linear(d, f, bias=False)
                self.down_proj = nn.Linear(f, d, bias=False)

            def forward(self, x):
                return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))

        class MLPfused(nn.Module):

            def __init__(self, d, f):
                super().__init__()
                self.gate_up_proj = nn.Linear(d, 2 * f, bias=False)
                self.down_proj = nn.Linear(f, d, bias=False)

            def forward(self, x):
                g, u = self.gate_up_proj(x).chunk(2, dim=-1)
                return self.down_proj(F.silu(g) * u)

        class Layer(nn.Module):

            def __init__(self, d, f, fused):
                super().__init__()
                self.input_layernorm = nn.LayerNorm(d)
                self.self_attn = Attn(d)
                self.post_attention_layernorm = nn.LayerNorm(d)
                self.mlp = MLPfused(d, f) if fused else MLPsep(d, f)

            def forward(self, x):
                x = x + self.self_attn(self.input_layernorm(x))
                return x + self.mlp(self.post_attention_layernorm(x))

        class Inner(nn.Module):

            def __init__(self, V, d, f):
                super().__init__()
                self.embed_tokens = nn.Embedding(V, d)
                self.layers = nn.ModuleList([Layer(d, f, False), Layer(d, f, True)])
                self.norm = nn.LayerNorm(d)

        class Llama(nn.Module):

            def __init__(self, V=61, d=32, f=40):
                super().__init__()
                self.model = Inner(V, d, f)
                self.lm_head = nn.Linear(d, V, bias=False)

            def forward(self, ids):
                x = self.model.embed_tokens(ids)
                for l in self.model.layers:
                    x = l(x)
                logits = self.lm_head(self.model.norm(x)).float()
                return F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))

        m = Llama()
        if args.frozen:
            for n in ["model.layers.0.self_attn.q_proj.weight", "model.layers.0.mlp.down_proj.weight",
                      "model.layers.1.mlp.gate_up_proj.weight", "model.norm.bias", "lm_head.weight"]:
                m.get_parameter(n).requires_grad_(False)
            m.model.register_buffer("rope_freq", 1.0 / (10000**(torch.arange(0, 8, 2).float() / 8)))
        return m
    if kind == "autoep":

        class Cfg:
            model_type = "mixtral"
            num_local_experts = 4
            num_experts_per_tok = 2
            hidden_size = 16
            intermediate_size = 24

        class Experts(nn.Module):

            def __init__(self, E, f, d):
                super().__init__()
                self.gate_up_proj = nn.Parameter(torch.randn(E, 2 * f, d) * 0.2)
                self.down_proj = nn.Parameter(torch.randn(E, d, f) * 0.2)

        class MoEBlock(nn.Module):

            def __init__(self, E=4, f=24, d=16):
                super().__init__()
                self.gate = nn.Linear(d, E, bias=False)
                self.experts = Experts(E, f, d)
                self.top_k = 2

            def forward(self, x):
                shp = x.shape
                h = x.reshape(-1, shp[-1])
                s = torch.softmax(self.gate(h), -1)
                ts, ti = torch.topk(s, k=self.top_k, dim=-1)
                ts = ts / ts.sum(-1, keepdim=True)
                out = torch.zeros_like(h)
                for e in range(self.gate.out_features):
                    m = ti == e
                    if not m.any():
                        continue
                    tok, r = m.nonzero(as_tuple=True)
                    gu = h[tok] @ self.experts.gate_up_proj[e].t()
                    g, u = gu.chunk(2, -1)
                    out[tok] += (F.silu(g) * u) @ self.experts.down_proj[e].t() * ts[tok, r].unsqueeze(-1)
                return out.reshape(shp)

        class Layer(nn.Module):

            def __init__(self, d):
                super().__init__()
                self.input_layernorm = nn.LayerNorm(d)
                self.dense = nn.Linear(d, d, bias=False)
                self.post_attention_layernorm = nn.LayerNorm(d)
                self.mlp = MoEBlock(d=d)

        class MoE(nn.Module):

            def __init__(self, d=16):
                super().__init__()
                self.config = Cfg()
                self.model = nn.Module()
                self.model.layers = nn.ModuleList([Layer(d) for _ in range(2)])
                self.lm_head = nn.Linear(d, 11, bias=False)

            def forward(self, x):
                for l in self.model.layers:
                    x = x + l.dense(l.input_layernorm(x))
                    x = x + l.mlp(l.post_attention_layernorm(x))
                return self.lm_head(x).float().pow(2).mean()

        m = MoE()
        if args.frozen:
            for n in ["model.layers.0.dense.weight", "model.layers.1.input_layernorm.bias"]:
                m.get_parameter(n).requires_grad_(False)
            m.model.register_buffer("rope_freq", 1.0 / (10000**(torch.arange(0, 8, 2).float() / 8)))
        return m
    raise ValueError(kind)


# ---------------------------------------------------------------- config
TP_SPECS = {
    "use_default_specs":
    False,
    "layer_specs": [{
        "patterns": [".*\\.self_attn\\.o_proj\\.weight$", ".*\\.mlp\\.down_proj\\.weight$"],
        "partition_type": "row"
    }, {
        "patterns": [".*\\.self_attn\\.[qkv]_proj\\.weight$", ".*\\.mlp\\.(gate|up)_proj\\.weight$"],
        "partition_type": "column"
    }, {
        "patterns": [".*\\.mlp\\.gate_up_proj\\.weight$"],
        "partition_type": "column",
        "shape": [2, -1],
        "partition_dim": 0
    }, {
        "patterns": [".*lm_head\\.weight$"],
        "partition_type": "column",
        "gather_output": True
    }]
}


def make_config(a):
    cfg = {
        "train_micro_batch_size_per_gpu": 1,
        "gradient_accumulation_steps": 1,
        "steps_per_print": 1000,
        "optimizer": {
            "type": "AdamW",
            "params": {
                "lr": 0.01,
                "weight_decay": 0.01,
                "torch_adam": True
            }
        },
        "zero_optimization": {
            "stage": a.stage
        },
        "wall_clock_breakdown": False,
    }
    if a.dtype == "bf16":
        cfg["bf16"] = {"enabled": True}
        if a.lowp:
            cfg["bf16"].update({"bf16_master_weights_and_grads": True, "bf16_optimizer_states": True})
    if a.dtype == "fp16":
        cfg["fp16"] = {"enabled": True, "initial_scale_power": 8}
    if a.grad_accum_fp32:
        cfg["data_types"] = {"grad_accum_dtype": "fp32"}
    if a.no_serialization:
        cfg["checkpoint"] = {"checkpoint_serialization": False}
    if a.kind == "autotp":
        cfg["tensor_parallel"] = {"autotp_size": a.tp, "partition_config": TP_SPECS}
    if a.kind == "autoep":
        cfg["expert_parallel"] = {"enabled": True, "autoep_size": a.ep, "preset_model": "mixtral", "use_grouped_mm": False}
    if a.fake_fused:
        cfg.pop("optimizer")
    if a.load_universal:
        cfg.setdefault("checkpoint", {})["load_universal"] = True
    return cfg


def tp_rule(name):
    if re.search(r"\.self_attn\.(o_proj)\.weight$|\.mlp\.down_proj\.weight$", name):
        return "cat_dim1"
    if re.search(r"\.mlp\.gate_up_proj\.weight$", name):
        return "sub_params2_cat_dim0"
    if re.search(r"\.self_attn\.[qkv]_proj\.(weight|bias)$|\.mlp\.(gate|up)_proj\.weight$|lm_head\.weight$", name):
        return "cat_dim0"
    return "replicated"


# ---------------------------------------------------------------- worker
def worker(rank, a):
    import torch
    import torch.distributed as tdist
    ws = a.world_size
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(ws), LOCAL_SIZE=str(ws),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(a.port))
    torch.set_num_threads(1)
    import deepspeed
    import deepspeed.comm as dist
    from deepspeed.utils import safe_get_full_fp32_param, groups
    deepspeed.init_distributed(dist_backend="gloo")
    cfg = make_config(a)
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[a.dtype]

    mpu = None
    if a.kind == "ulysses":
        from deepspeed.runtime.sequence_parallel import parallel_state_sp
        parallel_state_sp.initialize_sequence_parallel(a.sp)
        mpu = parallel_state_sp

    ref = build_model(a.kind, a)
    full_shapes = OrderedDict((k, list(v.shape)) for k, v in ref.state_dict().items())
    if a.zero_init and a.stage == 3:
        with deepspeed.zero.Init(config_dict_or_path=cfg, mpu=mpu):
            model = build_model(a.kind, a)
    else:
        model = build_model(a.kind, a)

    kw = {}
    if a.two_groups:
        g0 = [p for n, p in model.named_parameters() if p.requires_grad and (n.startswith("fc1") or n == "scale")]
        g1 = [p for n, p in model.named_parameters() if p.requires_grad and not (n.startswith("fc1") or n == "scale")]
        kw["model_parameters"] = [{"params": g0, "weight_decay": 0.0, "lr": 0.02}, {"params": g1, "weight_decay": 0.05}]
    elif a.fake_fused:
        kw["model_parameters"] = [p for p in model.parameters() if p.requires_grad]
    if a.fake_fused:
        from deepspeed.ops.adam import FusedAdam

        class TorchBackedFusedAdam(FusedAdam):
            """isinstance(FusedAdam) so the engine picks FP16_Optimizer; steps with torch AdamW sharing groups/state."""

            def __init__(self, params, lr=0.01, weight_decay=0.01):
                torch.optim.Optimizer.__init__(self, params, dict(lr=lr, betas=(0.9, 0.999), eps=1e-8,
                                                                  weight_decay=weight_decay, amsgrad=False))
                self._inner = None

            def step(self, closure=None, **kwargs):
                if self._inner is None:
                    self._inner = torch.optim.AdamW([torch.zeros(1, requires_grad=True)], lr=0.01)  # placeholder, groups/state replaced below
                    self._inner.param_groups = self.param_groups
                    self._inner.state = self.state
                    for g in self.param_groups:
                        for k, v in self._inner.defaults.items():
                            g.setdefault(k, v)
                return self._inner.step(closure)

        opt = TorchBackedFusedAdam(kw["model_parameters"])
        kw["optimizer"] = opt
    if a.dtype == "fp16":
        # CPU accelerator reports fp16 unsupported unless mkldnn fp16 exists; torch 2.6 CPU runs fp16 Linear fine.
        from deepspeed.accelerator import get_accelerator
        type(get_accelerator()).is_fp16_supported = lambda self: True
    engine, optimizer, _, _ = deepspeed.initialize(model=model, config=cfg, mpu=mpu, **kw)

    # ---- data: equal inside a TP group, distinct across data-parallel replicas
    tp = a.tp if a.kind == "autotp" else 1
    data_rank = rank // tp
    losses = []
    t0 = time.time()
    if a.load_universal:
        a.steps = 0
        engine.load_checkpoint(a.load_universal)
    for step in range(a.steps):
        g = torch.Generator().manual_seed(1000 * step + data_rank)
        if a.kind in ("plain", "ulysses"):
            x = torch.randn(2, 37, generator=g).to(dtype)
            y = torch.randn(2, 29, generator=g).to(dtype)
            loss = engine(x, y)
        elif a.kind == "autotp":
            ids = torch.randint(0, 61, (1, 8), generator=g)
            loss = engine(ids)
        else:
            x = torch.randn(1, 8, 16, generator=g).to(dtype)
            loss = engine(x)
        engine.backward(loss)
        engine.step()
        losses.append(float(loss))
    train_s = time.time() - t0

    t0 = time.time()
    if not a.load_universal:
        engine.save_checkpoint(a.out)
    save_s = time.time() - t0
    dist.barrier()

    # ---- expected
    module = engine.module
    sd = module.state_dict(keep_vars=True)
    param_ids = {id(p) for p in module.parameters()}
    stage0_map = {}
    if a.stage == 0:
        opt = engine.optimizer
        if hasattr(opt, "fp32_groups_flat") and hasattr(opt, "fp16_groups"):
            from torch._utils import _unflatten_dense_tensors
            for lp_group, flat in zip(opt.fp16_groups, opt.fp32_groups_flat):
                for p, t in zip(lp_group, _unflatten_dense_tensors(flat, lp_group)):
                    stage0_map[id(p)] = t
        elif hasattr(opt, "fp32_groups") and hasattr(opt, "fp16_groups"):
            for lp_group, hp_group in zip(opt.fp16_groups, opt.fp32_groups):
                for p, t in zip(lp_group, hp_group):
                    stage0_map[id(p)] = t
    tp_group = groups.get_tensor_model_parallel_group() if a.kind == "autotp" else None
    ep_group = groups._get_expert_parallel_group(f"ep_size_{a.ep}") if a.kind == "autoep" else None
    out = OrderedDict()
    info = OrderedDict()
    tp_incons = []
    for name, v in sd.items():
        if id(v) in param_ids and v.requires_grad:
            full = safe_get_full_fp32_param(v)
            src = "safe_get_full_fp32_param"
            if full is None:
                full = stage0_map.get(id(v))
                src = "stage0 optimizer fp32 copy"
            assert full is not None, name
            full = full.detach().float().cpu().clone()
        elif id(v) in param_ids:
            src = "frozen module param"
            if hasattr(v, "ds_id"):
                with deepspeed.zero.GatheredParameters([v]):
                    full = v.detach().float().cpu().clone()
            else:
                full = v.detach().float().cpu().clone()
        else:
            src = "buffer"
            full = v.detach().float().cpu().clone()
        rule = None
        if tp_group is not None:
            rule = tp_rule(name)
            parts = [None] * tdist.get_world_size(tp_group)
            tdist.all_gather_object(parts, full, group=tp_group)
            if rule == "replicated":
                eq = all(torch.equal(parts[0], p_) for p_ in parts)
                if not eq and a.load_universal:
                    tp_incons.append(f"{name} ({src}): tp copies differ, max abs {max(float((p_ - parts[0]).abs().max()) for p_ in parts):.3g}")
                    exp_ = torch.load(os.path.join(a.out, "expected.pt"), weights_only=False)["state_dict"][name]
                    tp_incons.append(f"   equal to expected per tp rank: {[torch.equal(p_, exp_) for p_ in parts]}")
                else:
                    assert eq, f"replicated {name} differs across tp"
                full = parts[0]
            elif rule == "cat_dim0":
                full = torch.cat(parts, 0)
            elif rule == "cat_dim1":
                full = torch.cat(parts, 1)
            else:
                halves = [p_.chunk(2, 0) for p_ in parts]
                full = torch.cat([h[0] for h in halves] + [h[1] for h in halves], 0)
        if ep_group is not None and id(v) in param_ids and not getattr(v, "allreduce", True):
            rule = "ep_gather_dim0"
            parts = [None] * tdist.get_world_size(ep_group)
            tdist.all_gather_object(parts, full, group=ep_group)
            full = torch.cat(parts, 0)
        out[name] = full.contiguous().clone()
        info[name] = {"source": src, "rule": rule, "shape": list(full.shape)}
    # consistency of expected across all ranks
    allv = [None] * ws
    tdist.all_gather_object(allv, out)
    consistent = all(all(torch.equal(allv[0][k], r[k]) for k in allv[0]) for r in allv)
    if rank == 0 and a.load_universal:
        exp = torch.load(os.path.join(a.out, "expected.pt"), weights_only=False)["state_dict"]
        probs = [k for k in exp if k not in out] + [k for k in out if k not in exp]
        probs += [f"{k}: {'shape' if exp[k].shape != out[k].shape else 'values'}" for k in exp if k in out and
                  (exp[k].shape != out[k].shape or not torch.equal(exp[k].view(-1).view(torch.int32), out[k].view(-1).view(torch.int32)))]
        for l in tp_incons:
            print("TPINCONS", l, flush=True)
        print("RELOAD", a.load_universal, "global_steps", engine.global_steps, "consistent", consistent,
              "BIT-EXACT" if not probs else f"DIFF {probs}", flush=True)
    elif rank == 0:
        import deepspeed as _ds
        shape_ok = {k: (list(out[k].shape) == full_shapes.get(k)) for k in out}
        meta = {
            "generator": vars(a),
            "ds_version": _ds.__version__,
            "ds_commit": "edaa7221267243c7be7fb49c5d5f5c4fb97b4641",
            "torch_version": torch.__version__,
            "python": sys.version.split()[0],
            "ds_config": cfg,
            "optimizer_class": type(engine.optimizer).__name__,
            "basic_optimizer_class": type(getattr(engine, "basic_optimizer", None)).__name__,
            "losses": losses,
            "train_seconds": round(train_s, 3),
            "save_seconds": round(save_s, 3),
            "expected_info": info,
            "expected_equal_across_all_ranks": consistent,
            "shapes_equal_to_unsharded_model": all(shape_ok.values()),
            "shape_mismatch": [k for k, ok in shape_ok.items() if not ok],
            "unsharded_model_state_dict_names": list(full_shapes.keys()),
            "global_steps": engine.global_steps,
        }
        if a.kind == "autotp":
            meta["rank_layout"] = "rank = dp_rank * tp + tp_rank (tp groups are consecutive ranks)"
        if a.kind == "autoep":
            meta["rank_layout"] = "ep rank = rank % ep; global expert id = ep_rank * num_local_experts + local id"
        torch.save({"state_dict": out, "meta": json.loads(json.dumps(meta, default=str))},
                   os.path.join(a.out, "expected.pt"), _use_new_zipfile_serialization=True)
        tag = open(os.path.join(a.out, "latest")).read().strip()
        meta["tag"] = tag
        meta["checkpoint_files"] = {
            f"{tag}/{f}": os.path.getsize(os.path.join(a.out, tag, f))
            for f in sorted(os.listdir(os.path.join(a.out, tag)))
        }
        z = os.path.join(a.out, "zero_to_fp32.py")
        if os.path.exists(z):
            os.remove(z)
        json.dump(meta, open(os.path.join(a.out, "meta.json"), "w"), indent=1, default=str)
        print("WROTE", a.out, "optimizer", meta["optimizer_class"], "consistent", consistent, "shapes_ok",
              meta["shapes_equal_to_unsharded_model"], meta["shape_mismatch"], flush=True)
    dist.barrier()


def main():
    a = parse()
    if not a.port:
        a.port = 29500 + (os.getpid() % 3000)
    if not a.load_universal:
        if os.path.exists(a.out):
            shutil.rmtree(a.out)
        os.makedirs(a.out)
    import torch.multiprocessing as mp
    mp.spawn(worker, args=(a, ), nprocs=a.world_size, join=True)


if __name__ == "__main__":
    main()
