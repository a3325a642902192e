// The moments streams of plan_consolidation and the universal plan: formulas on hand-built
// metadata, and every tensor of DeepSpeed's own universal checkpoints (tests/data/universal)
// reproduced bit for bit from the original ZeRO checkpoints.
#include "plan/universal_plan.hpp"

#include <gtest/gtest.h>

#include "checkpoint/assemble.hpp"
#include "checkpoint/discovery.hpp"
#include "plan/consolidation.hpp"
#include "support/expected_state.hpp"
#include "support/materialize.hpp"
#include "support/synthetic_meta.hpp"
#include "support/test_files.hpp"
#include "support/universal_reference.hpp"
#include "zero2fp32/error.hpp"

namespace z2f::plan {
namespace {

constexpr std::uint64_t kExpAvgBase = std::uint64_t{1} << 40;
constexpr std::uint64_t kExpAvgSqBase = std::uint64_t{2} << 40;
constexpr std::uint64_t kStep2 = 0x40000000;  // 2.0f

// Gives every rank's flat group `g` Adam moments of `numel` elements (the whole padded
// partition, as torch's state holds it) at recognisable offsets, and a step.
void add_moments(checkpoint::CheckpointMeta& meta, std::uint64_t padded_numel) {
    for (std::uint32_t r = 0; r < meta.world_size; ++r) {
        checkpoint::OptimStatesInfo& optim = meta.optim[r];
        optim.group_states.resize(optim.master.size());
        for (std::size_t g = 0; g < optim.master.size(); ++g) {
            checkpoint::TensorRef ref = optim.master[g];
            std::uint64_t numel = padded_numel == 0 ? ref.numel : padded_numel;
            ref.shape = {numel};
            ref.numel = numel;
            ref.length = numel * 4;
            ref.offset = kExpAvgBase + testing::synthetic_master_offset(r, g);
            optim.group_states[g].exp_avg = ref;
            ref.offset = kExpAvgSqBase + testing::synthetic_master_offset(r, g);
            optim.group_states[g].exp_avg_sq = ref;
            optim.group_states[g].step = checkpoint::OptimizerStep{
                checkpoint::OptimizerStep::Form::kTensor, DType::kF32, {}, kStep2};
        }
        checkpoint::PickledGraphBuilder builder(optim.global_state.graph, "test");
        checkpoint::PickledNode groups;
        groups.kind = checkpoint::PickledNode::Kind::kList;
        for (std::size_t g = 0; g < optim.master.size(); ++g) {
            checkpoint::PickledNode group;
            group.kind = checkpoint::PickledNode::Kind::kDict;
            groups.children.push_back(builder.add(group));
        }
        optim.global_state.param_groups = builder.add(groups);
    }
}

std::string plan_error(const checkpoint::CheckpointMeta& meta) {
    try {
        plan_universal(meta);
    } catch (const Error& error) {
        return error.what();
    }
    return "";
}

TEST(ConsolidationStreams, MomentsUseTheMasterFormulaOnTheirOwnTensors) {
    // W = 4, one group A (3,5), B (2,): the masters hold 6, 6, 5, 0 elements; torch's moments
    // cover the padded partitions, 6 each. B is flat [15, 17): rank 2, local 3..4.
    checkpoint::CheckpointMeta meta = testing::synthetic_stage12(4, {{{"A", {3, 5}}, {"B", {2}}}});
    add_moments(meta, 6);
    PlanOptions options;
    options.stream = Stream::kExpAvgSq;
    ConsolidationPlan result = plan_consolidation(meta, options);
    const PlannedTensor& b = result.plan.tensors.back();
    ASSERT_EQ(b.name, "B");
    ASSERT_EQ(b.extents.size(), 1u);
    EXPECT_EQ(b.extents[0].offset, kExpAvgSqBase + testing::synthetic_master_offset(2, 0) + 3 * 4);
    EXPECT_EQ(b.extents[0].length, 8u);
    // Moments always keep their padding: no "trailing padding" warning for them.
    EXPECT_TRUE(result.warnings.empty());
    const PlannedTensor& a = result.plan.tensors.front();
    ASSERT_EQ(a.extents.size(), 3u);
    EXPECT_EQ(a.extents[2].offset, kExpAvgSqBase + testing::synthetic_master_offset(2, 0));
    EXPECT_EQ(a.extents[2].length, 3u * 4);
}

TEST(ConsolidationStreams, Stage3MomentsSkipThePadding) {
    checkpoint::CheckpointMeta meta = testing::synthetic_stage3(4, {{{"A", {3, 5}}, {"B", {2}}}});
    add_moments(meta, 0);
    PlanOptions options;
    options.stream = Stream::kExpAvg;
    ConsolidationPlan moments = plan_consolidation(meta, options);
    ConsolidationPlan masters = plan_consolidation(meta, PlanOptions{});
    ASSERT_EQ(moments.plan.tensors.size(), masters.plan.tensors.size());
    for (std::size_t i = 0; i < masters.plan.tensors.size(); ++i) {
        const auto& m = masters.plan.tensors[i].extents;
        const auto& e = moments.plan.tensors[i].extents;
        ASSERT_EQ(m.size(), e.size());
        for (std::size_t k = 0; k < m.size(); ++k) {
            EXPECT_EQ(e[k].offset, m[k].offset + kExpAvgBase);
            EXPECT_EQ(e[k].length, m[k].length);
        }
    }
}

TEST(ConsolidationStreams, MissingMomentsAreAnErrorOnlyWhenAsked) {
    checkpoint::CheckpointMeta meta = testing::synthetic_stage12(2, {{{"A", {3, 5}}}});
    EXPECT_NO_THROW(plan_consolidation(meta, PlanOptions{}));
    PlanOptions options;
    options.stream = Stream::kExpAvg;
    try {
        plan_consolidation(meta, options);
        ADD_FAILURE() << "planned moments that do not exist";
    } catch (const Error& error) {
        EXPECT_EQ(error.kind(), ErrorKind::kInput);
        EXPECT_NE(std::string(error.what()).find("holds no Adam exp_avg for flat group 0"),
                  std::string::npos)
            << error.what();
    }
    EXPECT_NE(plan_error(meta).find("holds no Adam step"), std::string::npos) << plan_error(meta);
}

TEST(UniversalPlan, ShapesAsTheFilesStoreThem) {
    checkpoint::CheckpointMeta meta =
        testing::synthetic_stage12(2, {{{"A", {3, 5}}, {"temp", {}}}});
    add_moments(meta, 0);
    UniversalPlan plan = plan_universal(meta);
    ASSERT_EQ(plan.params.size(), 2u);
    EXPECT_EQ(plan.plan.tensors[plan.params[0].tensors[0]].shape,
              (std::vector<std::uint64_t>{3, 5}));
    EXPECT_EQ(plan.plan.tensors[plan.params[1].tensors[2]].shape, (std::vector<std::uint64_t>{1}));
    EXPECT_EQ(plan.plan.tensors[plan.params[1].tensors[2]].name, "temp/exp_avg_sq");

    checkpoint::CheckpointMeta stage3 =
        testing::synthetic_stage3(2, {{{"A", {3, 5}}, {"temp", {}}}});
    add_moments(stage3, 0);
    UniversalPlan flat = plan_universal(stage3);
    EXPECT_EQ(flat.plan.tensors[flat.params[0].tensors[1]].shape, (std::vector<std::uint64_t>{15}));
    EXPECT_EQ(flat.plan.tensors[flat.params[1].tensors[0]].shape, (std::vector<std::uint64_t>{1}));
}

TEST(UniversalPlan, LowPrecisionMastersBecomeFloat32) {
    // bf16_master_weights_and_grads: 16-bit masters, fp32 moments; every file is float32.
    checkpoint::CheckpointMeta meta = testing::synthetic_stage12(2, {{{"w", {6}}}});
    add_moments(meta, 0);
    for (checkpoint::OptimStatesInfo& optim : meta.optim) {
        optim.master[0].dtype = DType::kBF16;
        optim.master[0].length = optim.master[0].numel * 2;
    }
    UniversalPlan plan = plan_universal(meta);
    const PlannedTensor& master = plan.plan.tensors[plan.params[0].tensors[0]];
    EXPECT_EQ(master.source_dtype, DType::kBF16);
    EXPECT_EQ(master.output_dtype, DType::kF32);
    EXPECT_EQ(master.extents.size(), 2u);
    EXPECT_EQ(master.extents[0].length, 4u * 2);  // P = 4: ranks hold 4 and 2 elements
    EXPECT_EQ(master.extents[1].length, 2u * 2);
    EXPECT_EQ(plan.plan.tensors[plan.params[0].tensors[1]].source_dtype, DType::kF32);
}

TEST(UniversalPlan, RefusesWhatTheLoaderCannotTake) {
    checkpoint::CheckpointMeta meta = testing::synthetic_stage12(2, {{{"a/b", {4}}}});
    add_moments(meta, 0);
    EXPECT_NE(plan_error(meta).find("cannot be a folder name"), std::string::npos);

    checkpoint::CheckpointMeta steps = testing::synthetic_stage12(2, {{{"w", {4}}}});
    add_moments(steps, 0);
    steps.optim[1].group_states[0].step->bits = 0x40400000;  // 3.0f
    EXPECT_NE(plan_error(steps).find("differs from rank 0's"), std::string::npos);

    checkpoint::CheckpointMeta groups = testing::synthetic_stage12(2, {{{"w", {4}}}});
    add_moments(groups, 0);
    groups.optim[0].global_state.param_groups.reset();
    EXPECT_NE(plan_error(groups).find("no optimizer param_groups"), std::string::npos);
}

// Every tensor of every reference universal checkpoint, from the original checkpoint.
TEST(UniversalPlan, ReproducesDeepSpeedsUniversalTensorsBitForBit) {
    ASSERT_EQ(testing::universal_fixtures().size(), 7u);
    std::size_t compared = 0;
    for (const std::string& fixture : testing::universal_fixtures()) {
        SCOPED_TRACE(fixture);
        checkpoint::CheckpointMeta meta = checkpoint::read_checkpoint_meta(
            checkpoint::discover_checkpoint(testing::fixture_path(fixture), ""));
        UniversalPlan plan = plan_universal(meta);
        const std::string tag_dir = testing::universal_tag_dir(fixture);
        std::vector<std::string> names;
        for (const UniversalParam& param : plan.params) {
            names.push_back(param.name);
            for (std::size_t s = 0; s < 3; ++s) {
                const std::uint32_t index = param.tensors[s];
                const PlannedTensor& tensor = plan.plan.tensors[index];
                const std::string path = tag_dir + "/zero/" + param.name + "/" +
                                         std::string(stream_name(static_cast<Stream>(s))) + ".pt";
                SCOPED_TRACE(path);
                testing::UniversalTensorFile reference = testing::read_universal_tensor_file(path);
                EXPECT_EQ(tensor.shape, reference.shape);
                EXPECT_EQ(tensor.output_dtype, reference.dtype);
                EXPECT_EQ(reference.param_dict, meta.layout != checkpoint::MasterLayout::kPerParam);
                EXPECT_EQ(testing::materialize(plan.plan, index), reference.bytes);
                ++compared;
            }
        }
        std::sort(names.begin(), names.end());
        EXPECT_EQ(names, testing::universal_param_folders(tag_dir));
    }
    // Five mlp models of 8 trainable parameters, the frozen one (6), the tied one (3).
    EXPECT_EQ(compared, 3u * (5 * 8 + 6 + 3));
}

// BF16_Optimizer (no universal reference: DeepSpeed's converter was not run on it): padded
// partitions and padded moments; the masters must still be the engine's, and the moments cover
// exactly the parameters.
TEST(UniversalPlan, Bf16OptimizerCheckpoints) {
    checkpoint::CheckpointMeta meta = checkpoint::read_checkpoint_meta(
        checkpoint::discover_checkpoint(testing::fixture_path("z1_ws2_bf16opt"), ""));
    UniversalPlan plan = plan_universal(meta);
    auto expected =
        testing::read_expected_state_dict(testing::fixture_path("z1_ws2_bf16opt/expected.pt"));
    ASSERT_EQ(plan.params.size(), expected.size());
    for (const UniversalParam& param : plan.params) {
        SCOPED_TRACE(param.name);
        const testing::ExpectedTensor* truth = testing::find_tensor(expected, param.name);
        ASSERT_NE(truth, nullptr);
        EXPECT_EQ(testing::materialize(plan.plan, param.tensors[0]), truth->bytes);
        for (std::size_t s = 1; s < 3; ++s) {
            EXPECT_EQ(plan.plan.tensors[param.tensors[s]].numel(), testing::numel_of(truth->shape));
        }
    }
}

}  // namespace
}  // namespace z2f::plan
