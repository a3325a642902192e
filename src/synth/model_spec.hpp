// The model a synthetic checkpoint pretends to come from: a Llama-style decoder as Hugging
// Face's LlamaForCausalLM names it, with the parameter order, buffers, tied weights, frozen
// parameters and optimizer param groups that DeepSpeed would record for it.
//
// Parameters in module order (model.state_dict() / named_parameters()):
//
//   model.embed_tokens.weight                         [vocab, hidden]
//   for i in 0..layers-1, prefix model.layers.i:
//     .self_attn.q_proj.weight                        [heads * head_dim, hidden]
//     .self_attn.k_proj.weight                        [kv_heads * head_dim, hidden]
//     .self_attn.v_proj.weight                        [kv_heads * head_dim, hidden]
//     .self_attn.o_proj.weight                        [hidden, heads * head_dim]
//     .mlp.gate_proj.weight                           [ffn, hidden]
//     .mlp.up_proj.weight                             [ffn, hidden]
//     .mlp.down_proj.weight                           [hidden, ffn]
//     .input_layernorm.weight                         [hidden]
//     .post_attention_layernorm.weight                [hidden]
//   model.norm.weight                                 [hidden]
//   lm_head.weight                                    [vocab, hidden]
//
// Optional persistent buffers of `model` (they come before its children in state_dict order):
// model.pos_scale [hidden] in the model dtype and model.position_ids [1, 256] int64.
//
// Tied (--tied): lm_head.weight is the same Parameter as model.embed_tokens.weight. It is then
// absent from named_parameters() (so from every optimizer group and param_shapes) but present
// in the module state dict, and DeepSpeed records shared_params = {lm_head.weight:
// model.embed_tokens.weight}.
//
// Param groups, as Hugging Face's Trainer builds them (2 groups, the default): group 0 = every
// trainable weight matrix (weight decay), group 1 = the RMSNorm weights (no decay); 1 group:
// everything together. Groups left without trainable parameters are dropped, as DeepSpeed does.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/dtype.hpp"

namespace z2f::synth {

struct LlamaShape {
    std::string preset;
    std::uint64_t vocab = 0;
    std::uint64_t hidden = 0;
    std::uint64_t ffn = 0;
    std::uint64_t layers = 0;
    std::uint64_t heads = 0;
    std::uint64_t kv_heads = 0;
    std::uint64_t head_dim = 0;
};

// "tiny" (about a million parameters), "1b", "8b", "70b", "405b" (the Llama 3.x / 3.2 shapes).
std::optional<LlamaShape> llama_preset(std::string_view name);
std::vector<std::string> llama_preset_names();

struct ShapeOverrides {
    std::optional<std::uint64_t> layers;
    std::optional<std::uint64_t> hidden;  // ffn and heads follow unless given too
    std::optional<std::uint64_t> ffn;
    std::optional<std::uint64_t> vocab;
    std::optional<std::uint64_t> heads;
    std::optional<std::uint64_t> kv_heads;
    std::optional<double> target_params;  // picks the layer count (after the other overrides)
};

// Applies the overrides; throws a usage error for impossible shapes (zero sizes, ...).
LlamaShape scale_shape(const LlamaShape& base, const ShapeOverrides& overrides, bool tied);

// Parameters of one shape (tied or not); used by the --params search.
std::uint64_t parameter_count(const LlamaShape& shape, bool tied);

struct ModelParam {
    std::string name;
    std::vector<std::uint64_t> shape;
    bool trainable = true;
    bool is_norm = false;  // RMSNorm weight: the no-decay group
    int group = -1;        // optimizer param group, -1 for frozen parameters
    std::uint64_t numel() const noexcept;
};

struct ModelBuffer {
    std::string name;
    std::vector<std::uint64_t> shape;
    bool is_int = false;  // int64 position_ids; otherwise a float buffer in the model dtype
    std::uint64_t numel() const noexcept;
};

// One entry of the module state dict, in order.
struct ModuleEntry {
    enum class Kind : std::uint8_t { kBuffer, kParam, kAlias };
    Kind kind = Kind::kParam;
    std::size_t index = 0;  // into buffers, or params (for kAlias: the owner parameter)
    std::string name;
};

struct ModelSpec {
    LlamaShape shape;
    DType dtype = DType::kBF16;      // the model / training dtype
    std::vector<ModelParam> params;  // named_parameters() order (no tied alias)
    std::vector<ModelBuffer> buffers;
    std::vector<ModuleEntry> module;        // state_dict() order
    std::optional<std::string> tied_alias;  // "lm_head.weight" when tied (owner: embed)
    std::size_t tied_owner = 0;
    // Submodule prefixes in module-tree order ("" first): the state dict's _metadata.
    std::vector<std::string> submodules;
    int group_count = 0;  // param groups left with trainable parameters
    // Per remaining group: whether it is Hugging Face's weight-decay group (false: the no-decay
    // group, or the single group of --param-groups 1). Decides its param_groups entry.
    std::vector<bool> group_is_decay;
    bool hf_groups = false;  // --param-groups 2: groups carry their own weight_decay key
};

struct ModelOptions {
    DType dtype = DType::kBF16;
    bool buffers = false;
    bool tied = false;
    // Frozen parameters: a regex searched in each name, or a count N (all digits): the first N
    // parameters in module order. Empty: none.
    std::string frozen;
    int param_groups = 2;  // 1 or 2
};

ModelSpec build_model(const LlamaShape& shape, const ModelOptions& options);

}  // namespace z2f::synth
