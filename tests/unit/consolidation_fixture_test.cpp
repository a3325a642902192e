// Serial consolidation (plan + reading extents into memory) of every bundled real checkpoint,
// compared with the engine's own state dict (expected.pt) and with the real zero_to_fp32.py
// output (ref/).
#include <map>

#include <gtest/gtest.h>

#include "checkpoint/assemble.hpp"
#include "checkpoint/discovery.hpp"
#include "common/errors.hpp"
#include "plan/consolidation.hpp"
#include "support/expected_state.hpp"
#include "support/materialize.hpp"
#include "support/test_files.hpp"

namespace z2f {
namespace {

using testing::ExpectedTensor;

plan::PlanOptions parity_options() {
    plan::PlanOptions options;
    options.cast_all_buffers = true;
    options.keep_frozen_dtype = true;
    options.stage1_frozen = Stage1Frozen::kSkip;
    return options;
}

plan::ConsolidationPlan plan_fixture(const std::string& fixture, const plan::PlanOptions& options,
                                     const std::string& tag = "") {
    checkpoint::CheckpointFiles files =
        checkpoint::discover_checkpoint(testing::fixture_path(fixture), tag);
    checkpoint::CheckpointMeta meta = checkpoint::read_checkpoint_meta(files);
    return plan::plan_consolidation(meta, options);
}

// Defaults: every tensor of the engine's own state dict, bit for bit; trainable parameters are
// the fp32 masters; frozen parameters and float buffers fp32; integer buffers keep their dtype.
void expect_matches_engine(const std::string& fixture, const std::string& expected_file,
                           const std::string& tag = "") {
    SCOPED_TRACE(fixture + " " + tag);
    plan::ConsolidationPlan result = plan_fixture(fixture, plan::PlanOptions{}, tag);
    auto expected =
        testing::read_expected_state_dict(testing::fixture_path(fixture + "/" + expected_file));
    ASSERT_EQ(result.plan.tensors.size(), expected.size());
    for (std::size_t i = 0; i < result.plan.tensors.size(); ++i) {
        const plan::PlannedTensor& tensor = result.plan.tensors[i];
        SCOPED_TRACE(tensor.name);
        const ExpectedTensor* truth = testing::find_tensor(expected, tensor.name);
        ASSERT_NE(truth, nullptr);
        EXPECT_EQ(tensor.shape, truth->shape);
        EXPECT_EQ(tensor.output_dtype, truth->dtype);
        EXPECT_EQ(testing::materialize(result.plan, i), truth->bytes);
    }
}

// --parity: names, order, shapes, dtypes and values exactly as zero_to_fp32.py wrote them.
void expect_matches_zero_to_fp32(const std::string& fixture, const std::string& variant,
                                 plan::PlanOptions options = parity_options(),
                                 const std::string& tag = "") {
    SCOPED_TRACE(fixture + " " + variant);
    plan::ConsolidationPlan result = plan_fixture(fixture, options, tag);
    auto reference = testing::read_torch_state_dict(
        testing::fixture_path(fixture + "/ref/" + variant + "/pytorch_model.bin"));
    ASSERT_EQ(result.plan.tensors.size(), reference.size());
    for (std::size_t i = 0; i < reference.size(); ++i) {
        const plan::PlannedTensor& tensor = result.plan.tensors[i];
        EXPECT_EQ(tensor.name, reference[i].name) << i;
        EXPECT_EQ(tensor.shape, reference[i].shape) << tensor.name;
        EXPECT_EQ(tensor.output_dtype, reference[i].dtype) << tensor.name;
        EXPECT_EQ(testing::materialize(result.plan, i), reference[i].bytes) << tensor.name;
    }
}

const char* kFixturesWithBinRef[] = {
    "z1_ws2_fp32",        "z2_ws1_fp32",           "z2_ws2_fp32",          "z2_ws2_bf16",
    "z2_ws2_frozen_bf16", "z2_ws2_twogroups_fp32", "z2_ws2_multitag_fp32", "z3_ws1_fp32",
    "z3_ws2_fp32",        "z3_ws2_bf16",           "z3_ws2_frozen_bf16",   "z3_ws2_tied_fp32",
    "z3_ws4_fp32",        "z3_ws2_fp32_torch2",
};

TEST(ConsolidationFixtures, DefaultsEqualTheEnginesStateDict) {
    for (const char* fixture : kFixturesWithBinRef) {
        expect_matches_engine(fixture, "expected.pt");
    }
    expect_matches_engine("z1_ws2_bf16opt", "expected.pt");  // zero_to_fp32 refuses this one
}

TEST(ConsolidationFixtures, ParityEqualsZeroToFp32) {
    for (const char* fixture : kFixturesWithBinRef) {
        expect_matches_zero_to_fp32(fixture, "bin");
    }
}

TEST(ConsolidationFixtures, OtherTags) {
    expect_matches_engine("z2_ws2_multitag_fp32", "expected_global_step1.pt", "global_step1");
    expect_matches_engine("z2_ws2_multitag_fp32", "expected_global_step2.pt", "global_step2");
    expect_matches_zero_to_fp32("z2_ws2_multitag_fp32", "tag1", parity_options(), "global_step1");
}

TEST(ConsolidationFixtures, TagFolderGivenDirectly) {
    checkpoint::CheckpointFiles files = checkpoint::discover_checkpoint(
        testing::fixture_path("z2_ws2_multitag_fp32/global_step2"), "");
    EXPECT_EQ(files.tag, "global_step2");
    plan::ConsolidationPlan result =
        plan::plan_consolidation(checkpoint::read_checkpoint_meta(files), plan::PlanOptions{});
    auto expected = testing::read_expected_state_dict(
        testing::fixture_path("z2_ws2_multitag_fp32/expected_global_step2.pt"));
    ASSERT_EQ(result.plan.tensors.size(), expected.size());
    for (std::size_t i = 0; i < expected.size(); ++i) {
        EXPECT_EQ(testing::materialize(result.plan, i),
                  testing::find_tensor(expected, result.plan.tensors[i].name)->bytes);
    }
}

TEST(ConsolidationFixtures, ExcludeFrozenParameters) {
    for (const char* fixture : {"z2_ws2_frozen_bf16", "z3_ws2_frozen_bf16"}) {
        plan::PlanOptions options = parity_options();
        options.exclude_frozen = true;
        expect_matches_zero_to_fp32(fixture, "exclude_frozen", options);
    }
}

TEST(ConsolidationFixtures, FrozenParametersComeFirstAndStayBf16UnderParity) {
    plan::ConsolidationPlan result = plan_fixture("z3_ws2_frozen_bf16", parity_options());
    ASSERT_GE(result.plan.tensors.size(), 2u);
    EXPECT_EQ(result.plan.tensors[0].name, "fc1.weight");
    EXPECT_EQ(result.plan.tensors[0].role, TensorRole::kFrozen);
    EXPECT_EQ(result.plan.tensors[0].output_dtype, DType::kBF16);
    plan::ConsolidationPlan defaults = plan_fixture("z3_ws2_frozen_bf16", plan::PlanOptions{});
    EXPECT_EQ(defaults.plan.tensors[0].output_dtype, DType::kF32);
}

TEST(ConsolidationFixtures, TiedAliasSharesItsOwner) {
    plan::ConsolidationPlan result = plan_fixture("z3_ws2_tied_fp32", plan::PlanOptions{});
    const plan::PlannedTensor& last = result.plan.tensors.back();
    EXPECT_EQ(last.name, "lm_head.weight");
    EXPECT_EQ(last.role, TensorRole::kAlias);
    ASSERT_TRUE(last.is_alias());
    EXPECT_EQ(result.plan.tensors[static_cast<std::size_t>(last.alias_of)].name, "embed.weight");
    EXPECT_TRUE(last.extents.empty());
    // Integer buffers keep int64 by default; --cast-all-buffers makes them fp32 like zero_to_fp32.
    EXPECT_EQ(result.plan.tensors[1].name, "position_ids");
    EXPECT_EQ(result.plan.tensors[1].output_dtype, DType::kI64);
    EXPECT_EQ(plan_fixture("z3_ws2_tied_fp32", parity_options()).plan.tensors[1].output_dtype,
              DType::kF32);
}

TEST(ConsolidationFixtures, Bf16OutputDtypeAppliesToFloatingTensors) {
    plan::PlanOptions options;
    options.dtype = DType::kBF16;
    plan::ConsolidationPlan result = plan_fixture("z3_ws2_tied_fp32", options);
    for (const auto& tensor : result.plan.tensors) {
        EXPECT_EQ(tensor.output_dtype, tensor.name == "position_ids" ? DType::kI64 : DType::kBF16)
            << tensor.name;
    }
}

TEST(ConsolidationFixtures, MetaFacts) {
    checkpoint::CheckpointMeta z3 = checkpoint::read_checkpoint_meta(
        checkpoint::discover_checkpoint(testing::fixture_path("z3_ws4_fp32"), ""));
    EXPECT_EQ(z3.world_size, 4u);
    EXPECT_EQ(z3.zero_stage, 3);
    EXPECT_EQ(z3.layout, checkpoint::MasterLayout::kPerParam);
    EXPECT_EQ(z3.ds_version, "0.14.5");
    EXPECT_EQ(z3.inputs.size(), 8u);
    checkpoint::CheckpointMeta z1 = checkpoint::read_checkpoint_meta(
        checkpoint::discover_checkpoint(testing::fixture_path("z1_ws2_fp32"), ""));
    EXPECT_EQ(z1.zero_stage, 1);
    EXPECT_EQ(z1.layout, checkpoint::MasterLayout::kFlatGroups);
    checkpoint::CheckpointMeta bf16opt = checkpoint::read_checkpoint_meta(
        checkpoint::discover_checkpoint(testing::fixture_path("z1_ws2_bf16opt"), ""));
    EXPECT_EQ(bf16opt.layout, checkpoint::MasterLayout::kPaddedGroups);
    EXPECT_EQ(bf16opt.files.optim_prefix, "bf16_");
    checkpoint::CheckpointMeta torch2 = checkpoint::read_checkpoint_meta(
        checkpoint::discover_checkpoint(testing::fixture_path("z3_ws2_fp32_torch2"), ""));
    EXPECT_EQ(torch2.zero_stage, 3);  // pickled as ZeroStageEnum(3)
    checkpoint::CheckpointMeta z2 = checkpoint::read_checkpoint_meta(
        checkpoint::discover_checkpoint(testing::fixture_path("z2_ws2_fp32"), ""));
    EXPECT_EQ(z2.zero_stage, 2);  // pickled as getattr(ZeroStageEnum, 'gradients')
}

}  // namespace
}  // namespace z2f
