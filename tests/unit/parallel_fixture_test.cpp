// The four real parallel checkpoints (tests/data/deepspeed-parallel): metadata read in-process,
// the parallel plan built, every planned tensor read through its pieces (and, where the copy
// engine can do it today, through its flattened extents) straight from the input files, and
// compared with the live engine's fp32 weights (expected.pt): names, order, shapes, dtypes and
// bytes.
#include <cstring>

#include <gtest/gtest.h>

#include "checkpoint/file_grid.hpp"
#include "checkpoint/parallel_assemble.hpp"
#include "container/torch_file.hpp"
#include "plan/parallel_plan.hpp"
#include "support/expected_state.hpp"
#include "support/materialize.hpp"
#include "support/piece_reader.hpp"
#include "support/synthetic_meta.hpp"
#include "support/test_files.hpp"
#include "zero2fp32/error.hpp"

namespace z2f {
namespace {

using testing::ExpectedTensor;

std::string parallel_fixture(const std::string& relative) {
    return std::string(Z2F_TEST_DATA) + "/deepspeed-parallel/" + relative;
}

checkpoint::ParallelCheckpointMeta read_meta(const std::string& dir) {
    checkpoint::FileGrid grid = checkpoint::discover_file_grid(dir, "");
    return checkpoint::read_parallel_checkpoint_meta(grid);
}

plan::PiecedPlan plan_dir(const std::string& dir, const plan::ParallelPlanOptions& options = {}) {
    return plan::plan_parallel_consolidation(read_meta(dir), options);
}

// Every tensor of expected.pt, in its order, bit for bit, through the pieces; through the flat
// extents too whenever the plan provides them.
void expect_matches_engine(const plan::PiecedPlan& result, const std::string& fixture) {
    auto expected = testing::read_expected_state_dict(parallel_fixture(fixture + "/expected.pt"));
    ASSERT_EQ(result.plan.tensors.size(), expected.size());
    for (std::size_t i = 0; i < expected.size(); ++i) {
        const plan::PlannedTensor& tensor = result.plan.tensors[i];
        SCOPED_TRACE(expected[i].name);
        EXPECT_EQ(tensor.name, expected[i].name) << "at " << i;
        EXPECT_EQ(tensor.shape, expected[i].shape);
        EXPECT_EQ(tensor.output_dtype, expected[i].dtype);
        EXPECT_EQ(tensor.source_dtype, DType::kF32);
        testing::PieceResult read =
            testing::read_pieces(result.plan, tensor, result.plan.tensors[i].pieces);
        EXPECT_EQ(read.mismatch, "");
        EXPECT_EQ(read.bytes, expected[i].bytes);
        ASSERT_TRUE(plan::flattenable(result.plan.tensors[i].pieces));
        EXPECT_EQ(testing::read_source_bytes(result.plan, tensor), expected[i].bytes);
    }
}

const plan::PlannedTensor* find(const plan::PiecedPlan& result, const std::string& name,
                                std::size_t* index = nullptr) {
    for (std::size_t i = 0; i < result.plan.tensors.size(); ++i) {
        if (result.plan.tensors[i].name == name) {
            if (index != nullptr)
                *index = i;
            return &result.plan.tensors[i];
        }
    }
    return nullptr;
}

TEST(ParallelFixture, TensorParallelMatchesEngine) {
    const std::string dir = parallel_fixture("tp2_dp2_z1_fp32");
    checkpoint::ParallelCheckpointMeta meta = read_meta(dir);
    EXPECT_EQ(meta.kind, checkpoint::ParallelKind::kTensorParallel);
    EXPECT_EQ(meta.tp_degree, 2u);
    EXPECT_EQ(meta.pp_degree, 1u);
    EXPECT_EQ(meta.dp_degree, 2u);
    ASSERT_TRUE(meta.ranks[0].model.extras.universal_info.has_value());
    EXPECT_EQ(meta.ranks[0].model.extras.universal_info->original_vocab_size, 50);
    plan::PiecedPlan result = plan::plan_parallel_consolidation(meta, {});
    expect_matches_engine(result, "tp2_dp2_z1_fp32");

    // Replicated parameters are checked over both TP ranks; row-parallel weights are one
    // strided piece per rank; the fused SwiGLU weight two pieces per rank.
    std::size_t i = 0;
    ASSERT_NE(find(result, "language_model.encoder.final_layernorm.weight", &i), nullptr);
    ASSERT_EQ(result.plan.tensors[i].pieces.size(), 1u);
    EXPECT_EQ(result.plan.tensors[i].pieces[0].combine, plan::PieceCombine::kCheckEqual);
    EXPECT_EQ(result.plan.tensors[i].pieces[0].sources.size(), 2u);
    ASSERT_NE(find(result, "language_model.encoder.layers.0.mlp.dense_4h_to_h.weight", &i),
              nullptr);
    ASSERT_EQ(result.plan.tensors[i].pieces.size(), 2u);
    EXPECT_EQ(result.plan.tensors[i].pieces[1].rows, 16u);
    EXPECT_EQ(result.plan.tensors[i].pieces[1].offset, 21u * 4);
    // Its flat form (one extent per row and rank) is never stored: readers flatten the
    // range they need. The whole of it is 16 rows x 2 ranks, and one more extent
    // where a ZeRO-1 partition boundary cuts a row (two here).
    EXPECT_TRUE(result.plan.tensors[i].extents.empty());
    EXPECT_TRUE(result.plan.tensors[i].extents_from_pieces());
    EXPECT_EQ(plan::source_extents(result.plan.tensors[i]).size(), 34u);
    // Column-parallel and replicated tensors are stored flat: a few extents each.
    ASSERT_NE(find(result, "language_model.encoder.final_layernorm.weight", &i), nullptr);
    EXPECT_FALSE(result.plan.tensors[i].extents.empty());
    ASSERT_NE(find(result, "language_model.encoder.layers.1.mlp.dense_h_to_4h.weight", &i),
              nullptr);
    EXPECT_EQ(result.plan.tensors[i].pieces.size(), 4u);
}

TEST(ParallelFixture, TensorParallelReplicaPolicies) {
    const std::string dir = parallel_fixture("tp2_dp2_z1_fp32");
    for (plan::ReplicaPolicy policy :
         {plan::ReplicaPolicy::kFirst, plan::ReplicaPolicy::kAverage}) {
        plan::ParallelPlanOptions options;
        options.tp_replicated = policy;
        plan::PiecedPlan result = plan_dir(dir, options);
        auto expected = testing::read_expected_state_dict(dir + "/expected.pt");
        std::size_t i = 0;
        ASSERT_NE(find(result, "language_model.embedding.position_embeddings.weight", &i), nullptr);
        const auto& piece = result.plan.tensors[i].pieces.front();
        EXPECT_EQ(piece.combine, policy == plan::ReplicaPolicy::kFirst
                                     ? plan::PieceCombine::kCopy
                                     : plan::PieceCombine::kAverage);
        EXPECT_EQ(plan::flattenable(result.plan.tensors[i].pieces),
                  policy == plan::ReplicaPolicy::kFirst);
        // The replicas are bit-equal, so their mean is the same bytes.
        EXPECT_EQ(
            testing::read_pieces(result.plan, result.plan.tensors[i], result.plan.tensors[i].pieces)
                .bytes,
            testing::find_tensor(expected, result.plan.tensors[i].name)->bytes);
    }
}

TEST(ParallelFixture, CorruptedReplicaIsReported) {
    testing::TempDir temp;
    testing::copy_tree(parallel_fixture("tp2_dp2_z1_fp32"), temp.path() + "/ckpt");
    plan::PiecedPlan result = plan_dir(temp.path() + "/ckpt");
    const std::string name = "language_model.encoder.layers.1.input_layernorm.bias";
    std::size_t i = 0;
    ASSERT_NE(find(result, name, &i), nullptr);
    const plan::TensorPiece& piece = result.plan.tensors[i].pieces.front();
    ASSERT_EQ(piece.sources.size(), 2u);
    // Add 0.5 to one element of TP rank 1's copy.
    const SourceExtent& extent = piece.sources[1].front();
    const std::string& path = result.plan.inputs[extent.file].path;
    std::vector<std::byte> bytes = testing::read_file_bytes(path);
    float value;
    std::memcpy(&value, &bytes[extent.offset + 4], 4);
    value += 0.5f;
    std::memcpy(&bytes[extent.offset + 4], &value, 4);
    testing::write_file_bytes(path, bytes);

    testing::PieceResult read =
        testing::read_pieces(result.plan, result.plan.tensors[i], result.plan.tensors[i].pieces);
    EXPECT_NE(read.mismatch.find(name), std::string::npos) << read.mismatch;
    EXPECT_NEAR(read.largest_difference, 0.5, 1e-3);
}

TEST(ParallelFixture, VocabularyStrippingMatchesUniversalCheckpoint) {
    const std::string dir = parallel_fixture("tp2_dp2_z1_fp32");
    plan::ParallelPlanOptions options;
    options.strip_vocab_padding = true;
    plan::PiecedPlan result = plan_dir(dir, options);
    const std::string name = "language_model.embedding.word_embeddings.weight";
    std::size_t i = 0;
    ASSERT_NE(find(result, name, &i), nullptr);
    EXPECT_EQ(result.plan.tensors[i].shape, (std::vector<std::uint64_t>{50, 16}));
    std::vector<std::byte> ours = testing::read_source_bytes(result.plan, result.plan.tensors[i]);

    const std::string ref = dir + "/ref/universal/global_step2_universal/zero/" + name + "/fp32.pt";
    container::TorchFile file = container::TorchFile::open(ref);
    const auto* param = file.root().get<pickle::Dict>()->find("param")->get<pickle::Tensor>();
    ASSERT_NE(param, nullptr);
    container::TensorBytes located = file.locate(*param, "param");
    EXPECT_EQ(located.shape, (std::vector<std::uint64_t>{50, 16}));
    EXPECT_EQ(ours, testing::read_range(ref, located.offset, located.length));

    // Every other parameter equals its universal fp32.pt too.
    for (std::size_t t = 0; t < result.plan.tensors.size(); ++t) {
        const auto& tensor = result.plan.tensors[t];
        const std::string other =
            dir + "/ref/universal/global_step2_universal/zero/" + tensor.name + "/fp32.pt";
        container::TorchFile ref_file = container::TorchFile::open(other);
        const auto* ref_param =
            ref_file.root().get<pickle::Dict>()->find("param")->get<pickle::Tensor>();
        container::TensorBytes at = ref_file.locate(*ref_param, "param");
        EXPECT_EQ(testing::read_source_bytes(result.plan, tensor),
                  testing::read_range(other, at.offset, at.length))
            << tensor.name;
    }
}

TEST(ParallelFixture, TensorParallelWithoutRulesIsRefusedAndTpRulesFileWorks) {
    checkpoint::ParallelCheckpointMeta meta = read_meta(parallel_fixture("tp2_dp2_z1_fp32"));
    for (auto& rank : meta.ranks) {
        rank.model.extras.universal_info.reset();
    }
    try {
        plan::plan_parallel_consolidation(meta, {});
        FAIL() << "expected a refusal";
    } catch (const Error& error) {
        EXPECT_EQ(error.kind(), ErrorKind::kUnsupported);
        EXPECT_NE(std::string(error.what()).find("--tp-rules"), std::string::npos);
    }
    plan::ParallelPlanOptions options;
    const std::string rules = parallel_fixture("tp2_dp2_z1_fp32.tp-rules.json");
    options.tp_rules = plan::TpRuleSet::from_json(testing::read_text_file(rules), rules);
    expect_matches_engine(plan::plan_parallel_consolidation(meta, options), "tp2_dp2_z1_fp32");
}

TEST(ParallelFixture, PipelineWithZeroMatchesEngine) {
    checkpoint::ParallelCheckpointMeta meta = read_meta(parallel_fixture("pp2_dp2_z1_fp32"));
    EXPECT_EQ(meta.kind, checkpoint::ParallelKind::kPipeline);
    EXPECT_EQ(meta.pp_degree, 2u);
    EXPECT_EQ(meta.tp_degree, 1u);
    EXPECT_TRUE(meta.zero);
    expect_matches_engine(plan::plan_parallel_consolidation(meta, {}), "pp2_dp2_z1_fp32");
}

TEST(ParallelFixture, PipelineWithoutZeroMatchesEngine) {
    checkpoint::ParallelCheckpointMeta meta = read_meta(parallel_fixture("pp2_dp1_z0_fp32"));
    EXPECT_EQ(meta.kind, checkpoint::ParallelKind::kPipeline);
    EXPECT_FALSE(meta.zero);
    EXPECT_TRUE(meta.ranks[0].model.extras.has_plain_optimizer_state);
    plan::PiecedPlan result = plan::plan_parallel_consolidation(meta, {});
    EXPECT_TRUE(result.warnings.empty());  // fp32 weights: nothing lost
    expect_matches_engine(result, "pp2_dp1_z0_fp32");
}

TEST(ParallelFixture, MixtureOfExpertsMatchesEngine) {
    checkpoint::ParallelCheckpointMeta meta = read_meta(parallel_fixture("moe_ep2_dp2_z2_fp32"));
    EXPECT_EQ(meta.kind, checkpoint::ParallelKind::kMixtureOfExperts);
    EXPECT_EQ(meta.dp_degree, 4u);
    EXPECT_EQ(meta.ranks[0].model.extras.num_experts, (std::vector<std::int64_t>{4}));
    ASSERT_EQ(meta.ranks[0].optim[0].extras.groups.size(), 2u);
    EXPECT_TRUE(meta.ranks[0].optim[0].extras.groups[1].moe);
    EXPECT_FALSE(meta.ranks[0].model.states.param_shapes.has_value());
    expect_matches_engine(plan::plan_parallel_consolidation(meta, {}), "moe_ep2_dp2_z2_fp32");
}

// A two-stage pipeline whose embedding is tied to the last stage (TiedLayerSpec), built by hand:
// the tied weight is written once, at stage 0, with stage 1's copy as a second source to check;
// the layer files of the tied module are not taken for frozen parameters.
TEST(ParallelPlan, TiedPipelineWeightWrittenOnceAndChecked) {
    using checkpoint::TensorRef;
    using testing::f32_ref;
    checkpoint::ParallelCheckpointMeta meta;
    meta.kind = checkpoint::ParallelKind::kPipeline;
    meta.pp_degree = 2;
    meta.zero = true;
    meta.grid.tp_degree = 1;
    meta.grid.pp_degree = 2;
    meta.grid.model_files = {"/t/mp_rank_00_model_states.pt", "/t/mp_rank_01_model_states.pt"};
    meta.grid.optim_files = {{"/t/zero_pp_rank_0_mp_rank_00_optim_states.pt"},
                             {"/t/zero_pp_rank_0_mp_rank_01_optim_states.pt"}};
    meta.inputs = {meta.grid.model_files[0],      meta.grid.model_files[1],
                   meta.grid.optim_files[0][0],   meta.grid.optim_files[1][0],
                   "/t/layer_00-model_states.pt", "/t/layer_03-model_states.pt"};
    meta.input_sizes = {1000, 1000, 1000, 1000, 1000, 1000};
    const std::vector<std::vector<checkpoint::NamedShape>> shapes[2] = {
        {{{"tied_modules.embed.weight", {4, 2}}, {"1.weight", {3}}}},
        {{{"2.weight", {5}}, {"tied_modules.embed.weight", {4, 2}}}}};
    for (std::uint32_t s = 0; s < 2; ++s) {
        checkpoint::ModelParallelRank rank;
        rank.stage = s;
        rank.model_input = s;
        rank.model.states.module_is_none = true;
        rank.model.states.has_buffer_names = true;
        rank.model.states.shared_params.emplace();
        rank.model.states.param_shapes = shapes[s];
        rank.model.states.mp_world_size = 2;
        checkpoint::OptimFile optim;
        optim.states.zero_stage = 1;
        optim.states.partition_count = {1};
        optim.states.master = {f32_ref(2 + s, s == 0 ? 11 : 13, 64)};
        rank.optim.push_back(optim);
        rank.optim_inputs = {2 + s};
        meta.ranks.push_back(rank);
    }
    TensorRef layer_weight = f32_ref(4, 8);
    layer_weight.shape = {4, 2};
    meta.layers.push_back({0, 0, 4, {{{"weight", layer_weight}}}});
    layer_weight.file = 5;
    meta.layers.push_back({3, 0, 5, {{{"weight", layer_weight}}}});

    plan::PiecedPlan result = plan::plan_parallel_consolidation(meta, {});
    ASSERT_EQ(result.plan.tensors.size(), 3u);
    EXPECT_EQ(result.plan.tensors[0].name, "tied_modules.embed.weight");
    EXPECT_EQ(result.plan.tensors[1].name, "1.weight");
    EXPECT_EQ(result.plan.tensors[2].name, "2.weight");
    ASSERT_EQ(result.plan.tensors[0].pieces.size(), 1u);
    const plan::TensorPiece& tied = result.plan.tensors[0].pieces[0];
    EXPECT_EQ(tied.combine, plan::PieceCombine::kCheckEqual);
    ASSERT_EQ(tied.sources.size(), 2u);
    EXPECT_EQ(tied.sources[0], (std::vector<SourceExtent>{{2, 64, 32}}));
    EXPECT_EQ(tied.sources[1], (std::vector<SourceExtent>{{3, 64 + 20, 32}}));
    EXPECT_EQ(result.plan.tensors[0].extents, tied.sources[0]);  // flat: the first copy
    EXPECT_EQ(result.plan.tensors[2].extents, (std::vector<SourceExtent>{{3, 64, 20}}));
}

}  // namespace
}  // namespace z2f
