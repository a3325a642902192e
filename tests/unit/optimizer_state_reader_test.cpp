// The Adam moments, steps and global optimizer state read from the real fixtures
// (tests/data/deepspeed), as zero2fp32-inspect shows their pickles.
#include "checkpoint/optimizer_state_reader.hpp"

#include <gtest/gtest.h>

#include "checkpoint/assemble.hpp"
#include "checkpoint/discovery.hpp"
#include "support/fixture_plans.hpp"
#include "support/test_files.hpp"

namespace z2f::checkpoint {
namespace {

using testing::fixture_meta;

std::vector<std::string> entry_keys(const OptimizerGlobalState& state) {
    std::vector<std::string> keys;
    for (const PickledEntry& entry : state.entries) {
        keys.push_back(entry.key);
        EXPECT_EQ(state.graph.at(entry.key_node).kind, PickledNode::Kind::kString);
        EXPECT_EQ(state.graph.at(entry.key_node).text, entry.key);
    }
    return keys;
}

constexpr std::uint64_t kFloat2 = 0x40000000;  // 2.0f: two AdamW steps

void expect_adam_state(const OptimStatesInfo& optim, const std::string& what) {
    SCOPED_TRACE(what);
    ASSERT_EQ(optim.group_states.size(), optim.master.size());
    for (std::size_t g = 0; g < optim.master.size(); ++g) {
        const OptimizerGroupState& state = optim.group_states[g];
        ASSERT_TRUE(state.exp_avg && state.exp_avg_sq && state.step) << g;
        EXPECT_EQ(state.exp_avg->dtype, DType::kF32);
        EXPECT_EQ(state.exp_avg_sq->dtype, DType::kF32);
        EXPECT_EQ(state.exp_avg->numel, state.exp_avg_sq->numel);
        // Moments cover at least the saved (padding-stripped) master partition.
        EXPECT_GE(state.exp_avg->numel, optim.master[g].numel);
        EXPECT_NE(state.exp_avg->offset, state.exp_avg_sq->offset);
        EXPECT_EQ(state.step->form, OptimizerStep::Form::kTensor);
        EXPECT_EQ(state.step->dtype, DType::kF32);
        EXPECT_TRUE(state.step->shape.empty());
        EXPECT_EQ(state.step->bits, kFloat2);
    }
}

TEST(OptimizerStateReader, Stage2TorchForm) {
    CheckpointMeta meta = fixture_meta("z2_ws2_fp32");
    for (std::size_t r = 0; r < meta.optim.size(); ++r) {
        expect_adam_state(meta.optim[r], "rank " + std::to_string(r));
        const OptimizerGlobalState& global = meta.optim[r].global_state;
        EXPECT_EQ(entry_keys(global),
                  (std::vector<std::string>{"loss_scaler", "dynamic_loss_scale", "overflow",
                                            "clip_grad", "zero_stage", "group_paddings",
                                            "partition_count", "ds_version"}));
        ASSERT_TRUE(global.param_groups);
        const PickledNode& groups = global.graph.at(*global.param_groups);
        ASSERT_EQ(groups.kind, PickledNode::Kind::kList);
        ASSERT_EQ(groups.children.size(), 1u);
        EXPECT_EQ(global.graph.at(groups.children[0]).kind, PickledNode::Kind::kDict);
    }
    // The master partitions hold 1820 elements each (3640 = 2 x 1820, no padding).
    EXPECT_EQ(meta.optim[0].group_states[0].exp_avg->numel, 1820u);
}

TEST(OptimizerStateReader, LossScalerAndZeroStageAreKeptAsObjects) {
    CheckpointMeta meta = fixture_meta("z1_ws2_fp32");
    const OptimizerGlobalState& global = meta.optim[0].global_state;
    const PickledNode& scaler = global.graph.at(global.entries[0].value_node);
    ASSERT_EQ(scaler.kind, PickledNode::Kind::kObject);
    EXPECT_TRUE(scaler.via_newobj);
    ASSERT_TRUE(scaler.has_state);
    const PickledNode& cls = global.graph.at(scaler.children[0]);
    EXPECT_EQ(cls.kind, PickledNode::Kind::kGlobal);
    EXPECT_EQ(cls.text, "deepspeed.runtime.fp16.loss_scaler");
    EXPECT_EQ(cls.name, "LossScaler");
    const PickledNode& state = global.graph.at(scaler.children[2]);
    ASSERT_EQ(state.kind, PickledNode::Kind::kDict);
    ASSERT_EQ(state.children.size(), 4u);
    EXPECT_EQ(global.graph.at(state.children[1]).kind, PickledNode::Kind::kFloat);
    EXPECT_EQ(global.graph.at(state.children[1]).real, 1.0);

    const PickledNode& stage = global.graph.at(global.entries[4].value_node);
    ASSERT_EQ(stage.kind, PickledNode::Kind::kObject);
    EXPECT_FALSE(stage.via_newobj);
    EXPECT_EQ(global.graph.at(stage.children[0]).name, "getattr");
    const PickledNode& args = global.graph.at(stage.children[1]);
    ASSERT_EQ(args.children.size(), 2u);
    EXPECT_EQ(global.graph.at(args.children[0]).name, "ZeroStageEnum");
    EXPECT_EQ(global.graph.at(args.children[1]).text, "optimizer_states");
}

TEST(OptimizerStateReader, SharedObjectsStayShared) {
    // torch gives every param group the same `betas` tuple and the same key strings; the source
    // pickle references them again through the memo, and so does the graph.
    CheckpointMeta meta = fixture_meta("z2_ws2_twogroups_fp32");
    const OptimizerGlobalState& global = meta.optim[0].global_state;
    expect_adam_state(meta.optim[0], "rank 0");
    ASSERT_EQ(meta.optim[0].group_states.size(), 2u);
    const PickledNode& groups = global.graph.at(*global.param_groups);
    ASSERT_EQ(groups.children.size(), 2u);
    const PickledNode& first = global.graph.at(groups.children[0]);
    const PickledNode& second = global.graph.at(groups.children[1]);
    ASSERT_EQ(first.children.size(), second.children.size());
    EXPECT_EQ(first.children[0], second.children[0]);  // the key 'weight_decay'
    EXPECT_NE(first.children[1], second.children[1]);  // 0.1 and 0.0
    EXPECT_EQ(first.children[5], second.children[5]);  // betas
    EXPECT_EQ(global.graph.at(first.children[5]).kind, PickledNode::Kind::kTuple);
    // Each group's state is keyed by its parameter index: 0 and 1, with distinct moments.
    EXPECT_NE(meta.optim[0].group_states[0].exp_avg->offset,
              meta.optim[0].group_states[1].exp_avg->offset);
}

TEST(OptimizerStateReader, Stage3SubGroupsAndTorch2Pickles) {
    for (const char* fixture :
         {"z3_ws2_fp32", "z3_ws2_fp32_torch2", "z3_ws4_fp32", "z3_ws2_bf16"}) {
        CheckpointMeta meta = fixture_meta(fixture);
        for (std::size_t r = 0; r < meta.optim.size(); ++r) {
            const OptimStatesInfo& optim = meta.optim[r];
            expect_adam_state(optim, std::string(fixture) + " rank " + std::to_string(r));
            for (std::size_t j = 0; j < optim.master.size(); ++j) {
                EXPECT_EQ(optim.group_states[j].exp_avg->numel, optim.master[j].numel);
            }
            const std::vector<std::string> keys = entry_keys(optim.global_state);
            EXPECT_EQ(keys.front(), "zero_stage") << fixture;
            EXPECT_TRUE(optim.global_state.param_groups) << fixture;
        }
    }
}

TEST(OptimizerStateReader, Bf16OptimizerHasNoLossScaler) {
    CheckpointMeta meta = fixture_meta("z1_ws2_bf16opt");
    for (const OptimStatesInfo& optim : meta.optim) {
        expect_adam_state(optim, "bf16opt");
        EXPECT_EQ(optim.group_states[0].exp_avg->numel, optim.master[0].numel);
        EXPECT_EQ(entry_keys(optim.global_state),
                  (std::vector<std::string>{"clip_grad", "group_paddings", "partition_count",
                                            "ds_version"}));
    }
}

}  // namespace
}  // namespace z2f::checkpoint
