#include "synth/model_spec.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "common/errors.hpp"
#include "synth/name_pattern.hpp"

namespace z2f::synth {
namespace {

std::uint64_t product(const std::vector<std::uint64_t>& shape) {
    std::uint64_t n = 1;
    for (std::uint64_t d : shape) {
        n *= d;
    }
    return n;
}

// Parameters outside the layers: embedding, final norm, and an untied lm_head.
std::uint64_t fixed_params(const LlamaShape& s, bool tied) {
    return s.vocab * s.hidden * (tied ? 1 : 2) + s.hidden;
}

std::uint64_t layer_params(const LlamaShape& s) {
    std::uint64_t q = s.heads * s.head_dim;
    std::uint64_t kv = s.kv_heads * s.head_dim;
    return s.hidden * (2 * q + 2 * kv) + 3 * s.hidden * s.ffn + 2 * s.hidden;
}

// Largest divisor of `n` that is at most `limit` (1 at worst).
std::uint64_t divisor_at_most(std::uint64_t n, std::uint64_t limit) {
    for (std::uint64_t d = std::min(n, limit); d > 1; --d) {
        if (n % d == 0) {
            return d;
        }
    }
    return 1;
}

bool all_digits(std::string_view text) {
    return !text.empty() &&
           std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

std::uint64_t ModelParam::numel() const noexcept {
    return product(shape);
}

std::uint64_t ModelBuffer::numel() const noexcept {
    return product(shape);
}

std::optional<LlamaShape> llama_preset(std::string_view name) {
    // Llama 3.2 1B, Llama 3.1 8B / 70B / 405B configs (vocab 128256, GQA with 8 KV heads).
    if (name == "tiny")
        return LlamaShape{"tiny", 2048, 128, 352, 2, 4, 2, 32};
    if (name == "1b")
        return LlamaShape{"1b", 128256, 2048, 8192, 16, 32, 8, 64};
    if (name == "8b")
        return LlamaShape{"8b", 128256, 4096, 14336, 32, 32, 8, 128};
    if (name == "70b")
        return LlamaShape{"70b", 128256, 8192, 28672, 80, 64, 8, 128};
    if (name == "405b")
        return LlamaShape{"405b", 128256, 16384, 53248, 126, 128, 8, 128};
    return std::nullopt;
}

std::vector<std::string> llama_preset_names() {
    return {"tiny", "1b", "8b", "70b", "405b"};
}

std::uint64_t parameter_count(const LlamaShape& shape, bool tied) {
    return fixed_params(shape, tied) + shape.layers * layer_params(shape);
}

LlamaShape scale_shape(const LlamaShape& base, const ShapeOverrides& o, bool tied) {
    LlamaShape s = base;
    if (o.hidden) {
        if (*o.hidden == 0)
            throw_usage_error("--hidden must be positive");
        // Keep the preset's ffn/hidden ratio (rounded to a multiple of 8 when that is possible)
        // and its head size where it divides the new width.
        double ratio = static_cast<double>(base.ffn) / static_cast<double>(base.hidden);
        auto ffn = static_cast<std::uint64_t>(std::llround(ratio * static_cast<double>(*o.hidden)));
        s.ffn = ffn >= 16 ? ffn / 8 * 8 : std::max<std::uint64_t>(ffn, 1);
        s.hidden = *o.hidden;
        s.head_dim = divisor_at_most(s.hidden, base.head_dim);
        s.heads = s.hidden / s.head_dim;
        s.kv_heads = divisor_at_most(s.heads, base.kv_heads);
    }
    if (o.ffn)
        s.ffn = *o.ffn;
    if (o.vocab)
        s.vocab = *o.vocab;
    if (o.heads) {
        if (*o.heads == 0)
            throw_usage_error("--heads must be positive");
        s.heads = *o.heads;
        // head_dim stays as the shape has it unless the hidden size splits evenly.
        if (s.hidden % s.heads == 0)
            s.head_dim = s.hidden / s.heads;
        s.kv_heads = divisor_at_most(s.heads, s.kv_heads);
    }
    if (o.kv_heads)
        s.kv_heads = *o.kv_heads;
    if (o.layers)
        s.layers = *o.layers;
    if (o.target_params) {
        double target = *o.target_params;
        double fixed = static_cast<double>(fixed_params(s, tied));
        double per_layer = static_cast<double>(layer_params(s));
        double layers = std::round((target - fixed) / per_layer);
        s.layers = layers < 1.0 ? 1 : static_cast<std::uint64_t>(layers);
    }
    if (s.vocab == 0 || s.hidden == 0 || s.ffn == 0 || s.heads == 0 || s.kv_heads == 0 ||
        s.head_dim == 0) {
        throw_usage_error("model shape with a zero size (vocab, hidden, ffn, heads, kv-heads)");
    }
    return s;
}

ModelSpec build_model(const LlamaShape& shape, const ModelOptions& options) {
    if (options.param_groups != 1 && options.param_groups != 2) {
        throw_usage_error("--param-groups must be 1 or 2");
    }
    ModelSpec spec;
    spec.shape = shape;
    spec.dtype = options.dtype;
    const std::uint64_t h = shape.hidden;
    const std::uint64_t q = shape.heads * shape.head_dim;
    const std::uint64_t kv = shape.kv_heads * shape.head_dim;

    auto add_param = [&](std::string name, std::vector<std::uint64_t> dims, bool norm) {
        spec.module.push_back({ModuleEntry::Kind::kParam, spec.params.size(), name});
        ModelParam param;
        param.name = std::move(name);
        param.shape = std::move(dims);
        param.is_norm = norm;
        spec.params.push_back(std::move(param));
    };

    spec.submodules.push_back("");
    spec.submodules.push_back("model");
    if (options.buffers) {
        spec.buffers.push_back({"model.pos_scale", {h}, false});
        spec.buffers.push_back({"model.position_ids", {1, 256}, true});
        for (std::size_t b = 0; b < spec.buffers.size(); ++b) {
            spec.module.push_back({ModuleEntry::Kind::kBuffer, b, spec.buffers[b].name});
        }
    }
    spec.submodules.push_back("model.embed_tokens");
    add_param("model.embed_tokens.weight", {shape.vocab, h}, false);
    spec.submodules.push_back("model.layers");
    for (std::uint64_t i = 0; i < shape.layers; ++i) {
        std::string p = "model.layers." + std::to_string(i);
        spec.submodules.push_back(p);
        spec.submodules.push_back(p + ".self_attn");
        for (const char* proj : {"q_proj", "k_proj", "v_proj", "o_proj"}) {
            spec.submodules.push_back(p + ".self_attn." + proj);
        }
        add_param(p + ".self_attn.q_proj.weight", {q, h}, false);
        add_param(p + ".self_attn.k_proj.weight", {kv, h}, false);
        add_param(p + ".self_attn.v_proj.weight", {kv, h}, false);
        add_param(p + ".self_attn.o_proj.weight", {h, q}, false);
        spec.submodules.push_back(p + ".mlp");
        for (const char* proj : {"gate_proj", "up_proj", "down_proj", "act_fn"}) {
            spec.submodules.push_back(p + ".mlp." + proj);
        }
        add_param(p + ".mlp.gate_proj.weight", {shape.ffn, h}, false);
        add_param(p + ".mlp.up_proj.weight", {shape.ffn, h}, false);
        add_param(p + ".mlp.down_proj.weight", {h, shape.ffn}, false);
        spec.submodules.push_back(p + ".input_layernorm");
        spec.submodules.push_back(p + ".post_attention_layernorm");
        add_param(p + ".input_layernorm.weight", {h}, true);
        add_param(p + ".post_attention_layernorm.weight", {h}, true);
    }
    spec.submodules.push_back("model.norm");
    add_param("model.norm.weight", {h}, true);
    spec.submodules.push_back("model.rotary_emb");
    spec.submodules.push_back("lm_head");
    if (options.tied) {
        spec.tied_alias = "lm_head.weight";
        spec.tied_owner = 0;
        spec.module.push_back({ModuleEntry::Kind::kAlias, 0, "lm_head.weight"});
    } else {
        add_param("lm_head.weight", {shape.vocab, h}, false);
    }

    // Frozen parameters.
    if (!options.frozen.empty()) {
        if (all_digits(options.frozen)) {
            // More digits than a uint64 holds still means "every parameter".
            std::uint64_t count =
                options.frozen.size() > 18 ? UINT64_MAX : std::stoull(options.frozen);
            for (std::size_t i = 0; i < spec.params.size() && i < count; ++i) {
                spec.params[i].trainable = false;
            }
        } else {
            std::vector<std::string> names;
            for (const ModelParam& param : spec.params)
                names.push_back(param.name);
            std::vector<bool> frozen = search_names(options.frozen, names, "--frozen");
            for (std::size_t i = 0; i < spec.params.size(); ++i) {
                if (frozen[i])
                    spec.params[i].trainable = false;
            }
        }
    }

    // Param groups: decay / no-decay as Hugging Face's Trainer splits them, then renumbered
    // without the groups that hold no trainable parameter (DeepSpeed drops those).
    bool used[2] = {false, false};
    for (ModelParam& param : spec.params) {
        if (param.trainable) {
            param.group = options.param_groups == 2 && param.is_norm ? 1 : 0;
            used[param.group] = true;
        }
    }
    if (!used[0] && !used[1]) {
        throw_usage_error("every parameter is frozen: DeepSpeed needs at least one trainable one");
    }
    if (!used[0]) {
        for (ModelParam& param : spec.params) {
            if (param.group == 1)
                param.group = 0;
        }
    }
    spec.group_count = (used[0] ? 1 : 0) + (used[1] ? 1 : 0);
    spec.hf_groups = options.param_groups == 2;
    if (spec.hf_groups) {
        if (used[0])
            spec.group_is_decay.push_back(true);
        if (used[1])
            spec.group_is_decay.push_back(false);
    } else {
        spec.group_is_decay.push_back(false);
    }
    return spec;
}

}  // namespace z2f::synth
