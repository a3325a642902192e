// Planning at the scale of the largest models, bounded by CTest's TIMEOUT (no wall-time
// assertions: the machine's speed varies, the work is linear).
#include <gtest/gtest.h>

#include "plan/consolidation.hpp"
#include "support/synthetic_meta.hpp"

namespace z2f {
namespace {

using testing::numel_of;
using testing::SyntheticParam;

TEST(PlanScale, Llama405bShapedPlanAtWorldSize512) {
    // ~1,100 tensors of llama-3.1-405B shapes (126 layers), W = 512, one sub-group per tensor
    // group of 1e9 elements. The work is linear; CTest's TIMEOUT bounds it.
    constexpr std::uint64_t hidden = 16384, ffn = 53248, vocab = 128256, kv = 1024;
    std::vector<std::vector<SyntheticParam>> subgroups(1);
    std::uint64_t in_group = 0;
    auto add = [&](const std::string& name, std::vector<std::uint64_t> shape) {
        std::uint64_t n = numel_of(shape);
        if (in_group >= 1000000000ULL) {
            subgroups.emplace_back();
            in_group = 0;
        }
        subgroups.back().push_back({name, std::move(shape)});
        in_group += n;
    };
    add("model.embed_tokens.weight", {vocab, hidden});
    for (int layer = 0; layer < 126; ++layer) {
        std::string p = "model.layers." + std::to_string(layer) + ".";
        add(p + "self_attn.q_proj.weight", {hidden, hidden});
        add(p + "self_attn.k_proj.weight", {kv, hidden});
        add(p + "self_attn.v_proj.weight", {kv, hidden});
        add(p + "self_attn.o_proj.weight", {hidden, hidden});
        add(p + "mlp.gate_proj.weight", {ffn, hidden});
        add(p + "mlp.up_proj.weight", {ffn, hidden});
        add(p + "mlp.down_proj.weight", {hidden, ffn});
        add(p + "input_layernorm.weight", {hidden});
        add(p + "post_attention_layernorm.weight", {hidden});
    }
    add("model.norm.weight", {hidden});
    add("lm_head.weight", {vocab, hidden});
    checkpoint::CheckpointMeta meta = testing::synthetic_stage3(512, subgroups);
    plan::ConsolidationPlan plan = plan::plan_consolidation(meta, plan::PlanOptions{});
    ASSERT_EQ(plan.plan.tensors.size(), 1137u);
    std::uint64_t total = 0;
    for (const auto& tensor : plan.plan.tensors)
        total += tensor.numel();
    EXPECT_GT(total, 405000000000ULL);
    EXPECT_EQ(plan.plan.tensors.back().extents.size(), 512u);
}

}  // namespace
}  // namespace z2f
