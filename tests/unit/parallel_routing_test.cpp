// The parallel checkpoints through the whole program without MPI: which reader a tag folder
// takes, the discovery payload between ranks, the public plan of each parallel fixture (grid,
// merge rules, files), the replicas check reading each copy, and the refusal of what the copy
// engine cannot execute yet (averaged replicas).
#include <algorithm>
#include <cstring>

#include <gtest/gtest.h>

#include "checkpoint/file_grid.hpp"
#include "checkpoint/parallel_assemble.hpp"
#include "checkpoint/routing.hpp"
#include "driver/execute/replica_check.hpp"
#include "plan/parallel_plan.hpp"
#include "run/run_plan.hpp"
#include "support/test_files.hpp"
#include "zero2fp32/error.hpp"
#include "zero2fp32/plan.hpp"

namespace z2f {
namespace {

std::string parallel_fixture(const std::string& relative) {
    return std::string(Z2F_TEST_DATA) + "/deepspeed-parallel/" + relative;
}

TEST(Routing, NamesDecideTheReader) {
    using checkpoint::takes_parallel_reader;
    // Data-parallel: ZeRO-1/2 and ZeRO-3 of one model-parallel rank.
    EXPECT_FALSE(takes_parallel_reader({"mp_rank_00_model_states.pt",
                                        "zero_pp_rank_0_mp_rank_00_optim_states.pt",
                                        "zero_pp_rank_1_mp_rank_00_optim_states.pt", "latest"}));
    EXPECT_FALSE(takes_parallel_reader({"zero_pp_rank_0_mp_rank_00_model_states.pt",
                                        "bf16_zero_pp_rank_0_mp_rank_00_optim_states.pt"}));
    // Parallel: a second model-parallel rank, in any role.
    EXPECT_TRUE(takes_parallel_reader({"mp_rank_00_model_states.pt", "mp_rank_01_model_states.pt",
                                       "zero_pp_rank_0_mp_rank_00_optim_states.pt",
                                       "zero_pp_rank_0_mp_rank_01_optim_states.pt"}));
    EXPECT_TRUE(takes_parallel_reader({"zero_pp_rank_0_mp_rank_00_model_states.pt",
                                       "zero_pp_rank_0_mp_rank_01_model_states.pt"}));
    // Pipeline layers, expert files, expert optimizer files.
    EXPECT_TRUE(takes_parallel_reader({"mp_rank_00_model_states.pt", "layer_01-model_states.pt"}));
    EXPECT_TRUE(takes_parallel_reader({"mp_rank_00_model_states.pt",
                                       "zero_pp_rank_0_mp_rank_00_optim_states.pt",
                                       "layer_0_expert_0_mp_rank_00_model_states.pt"}));
    EXPECT_TRUE(takes_parallel_reader(
        {"mp_rank_00_model_states.pt", "expp_rank_0_mp_rank_00_optim_states.pt"}));
    // ZeRO-0: the model file holds the weights.
    EXPECT_TRUE(takes_parallel_reader({"mp_rank_00_model_states.pt"}));
    // Nothing recognisable: the data-parallel reader says what is missing.
    EXPECT_FALSE(takes_parallel_reader({"zero_to_fp32.py"}));
}

TEST(Routing, EveryFixtureTakesItsReaderAndTheChoiceCrossesTheWire) {
    for (const char* name :
         {"tp2_dp2_z1_fp32", "pp2_dp2_z1_fp32", "pp2_dp1_z0_fp32", "moe_ep2_dp2_z2_fp32"}) {
        checkpoint::DiscoveredCheckpoint found =
            checkpoint::discover_any_checkpoint(parallel_fixture(name), "");
        ASSERT_TRUE(found.is_parallel()) << name;
        found.tp_rules_text = "{\"rules\": {}}";
        checkpoint::DiscoveredCheckpoint back =
            checkpoint::decode_discovered(checkpoint::encode_discovered(found));
        ASSERT_TRUE(back.is_parallel());
        EXPECT_EQ(back.tag_dir(), found.tag_dir());
        EXPECT_EQ(back.tp_rules_text, found.tp_rules_text);
        EXPECT_EQ(std::get<checkpoint::FileGrid>(back.files).model_files,
                  std::get<checkpoint::FileGrid>(found.files).model_files);
    }
    checkpoint::DiscoveredCheckpoint plain =
        checkpoint::discover_any_checkpoint(testing::fixture_path("z2_ws2_fp32"), "");
    EXPECT_FALSE(plain.is_parallel());
    checkpoint::DiscoveredCheckpoint back =
        checkpoint::decode_discovered(checkpoint::encode_discovered(plain));
    EXPECT_FALSE(back.is_parallel());
    EXPECT_FALSE(back.tp_rules_text.has_value());
    EXPECT_EQ(std::get<checkpoint::CheckpointFiles>(back.files).optim_files,
              std::get<checkpoint::CheckpointFiles>(plain.files).optim_files);
}

TEST(Routing, PublicPlanShowsTheGridAndTheMergeRules) {
    ConversionPlan tp = plan_conversion(parallel_fixture("tp2_dp2_z1_fp32"), Options{});
    ASSERT_TRUE(tp.parallel.has_value());
    EXPECT_EQ(tp.parallel->kind, "tensor-parallel");
    EXPECT_EQ(tp.parallel->tp, 2u);
    EXPECT_EQ(tp.parallel->pp, 1u);
    EXPECT_EQ(tp.parallel->dp, 2u);
    EXPECT_TRUE(tp.parallel->zero);
    EXPECT_EQ(tp.parallel->files.size(), 6u);
    EXPECT_EQ(tp.zero_stage, 1);
    EXPECT_EQ(tp.world_size, 4u);
    EXPECT_EQ(tp.tensors.size(), 16u);
    auto merge_of = [](const ConversionPlan& plan, const std::string& name) {
        for (const auto& tensor : plan.tensors) {
            if (tensor.name == name)
                return tensor.merge;
        }
        return std::string("(absent)");
    };
    EXPECT_EQ(merge_of(tp, "language_model.encoder.layers.0.mlp.dense_4h_to_h.weight"),
              "cat dim 1 over 2 TP ranks");
    EXPECT_EQ(merge_of(tp, "language_model.encoder.layers.1.mlp.dense_h_to_4h.weight"),
              "2 sub-parameters along dim 0 over 2 TP ranks");
    EXPECT_EQ(merge_of(tp, "language_model.encoder.final_layernorm.weight"),
              "replicated over 2 TP ranks, checked equal");
    EXPECT_EQ(merge_of(tp, "language_model.embedding.word_embeddings.weight"),
              "cat dim 0 over 2 TP ranks, padded vocabulary kept");

    ConversionPlan pp = plan_conversion(parallel_fixture("pp2_dp1_z0_fp32"), Options{});
    ASSERT_TRUE(pp.parallel.has_value());
    EXPECT_EQ(pp.parallel->kind, "pipeline");
    EXPECT_FALSE(pp.parallel->zero);
    EXPECT_EQ(pp.zero_stage, 0);

    ConversionPlan moe = plan_conversion(parallel_fixture("moe_ep2_dp2_z2_fp32"), Options{});
    ASSERT_TRUE(moe.parallel.has_value());
    EXPECT_EQ(moe.parallel->ep, 2u);
    EXPECT_EQ(merge_of(moe, "moe.deepspeed_moe.experts.deepspeed_experts.3.0.weight"),
              "expert 3 of 4, MoE layer 0");

    ConversionPlan plain = plan_conversion(testing::fixture_path("z2_ws2_fp32"), Options{});
    EXPECT_FALSE(plain.parallel.has_value());
}

TEST(Routing, AveragedReplicasArePlannedAsTheMeanOfEveryCopy) {
    Options options;
    options.tp_replicated = TpReplicated::kAverage;
    ConversionPlan plan = plan_conversion(parallel_fixture("tp2_dp2_z1_fp32"), options);
    auto norm = std::find_if(plan.tensors.begin(), plan.tensors.end(), [](const auto& tensor) {
        return tensor.name == "language_model.encoder.final_layernorm.weight";
    });
    ASSERT_NE(norm, plan.tensors.end());
    EXPECT_NE(norm->merge.find("averaged"), std::string::npos) << norm->merge;
    // Its replicas, one per TP rank, are what the engine averages (the flat extents are not).
    checkpoint::ParallelCheckpointMeta meta = checkpoint::read_parallel_checkpoint_meta(
        checkpoint::discover_file_grid(parallel_fixture("tp2_dp2_z1_fp32"), ""));
    plan::ParallelPlanOptions parallel;
    parallel.tp_replicated = plan::ReplicaPolicy::kAverage;
    plan::PiecedPlan pieced = plan::plan_parallel_consolidation(meta, parallel);
    for (const plan::PlannedTensor& tensor : pieced.plan.tensors) {
        if (tensor.name != norm->name)
            continue;
        EXPECT_TRUE(tensor.extents.empty());
        ASSERT_EQ(tensor.replicas.size(), 2u);
        for (const auto& replica : tensor.replicas) {
            std::uint64_t bytes = 0;
            for (const SourceExtent& extent : replica)
                bytes += extent.length;
            EXPECT_EQ(bytes, tensor.source_bytes());
        }
    }
}

TEST(Routing, TpRulesFileIsReadAndMissingOneIsAUsageError) {
    testing::TempDir temp;
    testing::write_text_file(temp.file("rules.json"), R"({"default": "column", "rules": {}})");
    Options options;
    options.tp_rules = temp.file("rules.json");
    // A pipeline has no TP ranks: the rules are read, then ignored with a warning.
    ConversionPlan plan = plan_conversion(parallel_fixture("pp2_dp2_z1_fp32"), options);
    ASSERT_EQ(plan.warnings.size(), 1u);
    EXPECT_NE(plan.warnings[0].find("--tp-rules is ignored"), std::string::npos);
    options.tp_rules = temp.file("absent.json");
    try {
        plan_conversion(parallel_fixture("tp2_dp2_z1_fp32"), options);
        FAIL() << "expected a usage error";
    } catch (const Error& error) {
        EXPECT_EQ(error.kind(), ErrorKind::kUsage);
        EXPECT_NE(std::string(error.what()).find("absent.json"), std::string::npos);
    }
}

run::RunPlan run_plan_of(const std::string& dir, std::uint32_t ranks) {
    run::CheckpointMetadata metadata;
    metadata.meta =
        checkpoint::read_parallel_checkpoint_meta(checkpoint::discover_file_grid(dir, ""));
    run::RunSettings settings;
    settings.ranks = ranks;
    return run::build_run_plan(run::tensor_source(metadata, settings.options), settings);
}

TEST(ReplicaCheck, EveryReplicatedTensorIsCheckedOnceOverTheRanks) {
    run::RunPlan plan = run_plan_of(parallel_fixture("tp2_dp2_z1_fp32"), 3);
    std::vector<driver::ReplicaCheck> checks = driver::plan_replica_checks(plan, 3);
    std::size_t replicated = 0;
    for (const auto& tensor : plan.tensors.tensors)
        replicated += tensor.merge.starts_with("replicated") ? 1u : 0u;
    EXPECT_EQ(checks.size(), replicated);
    std::vector<std::uint64_t> load(3, 0);
    for (const auto& check : checks)
        load.at(check.rank) += check.bytes;
    for (std::uint64_t bytes : load)
        EXPECT_GT(bytes, 0u);
    io::InputFiles inputs(plan.tensors.inputs, 16);
    for (std::uint32_t rank = 0; rank < 3; ++rank)
        EXPECT_TRUE(driver::check_replicas_of(plan, rank, inputs, 256).empty());
    // --tp-replicated first: nothing to compare.
    run::CheckpointMetadata metadata;
    metadata.meta = checkpoint::read_parallel_checkpoint_meta(
        checkpoint::discover_file_grid(parallel_fixture("tp2_dp2_z1_fp32"), ""));
    run::RunSettings settings;
    settings.options.tp_replicated = TpReplicated::kFirst;
    run::RunPlan first =
        run::build_run_plan(run::tensor_source(metadata, settings.options), settings);
    EXPECT_TRUE(driver::plan_replica_checks(first, 1).empty());
}

TEST(ReplicaCheck, AMismatchNamesTheTensorTheFilesAndTheLargestDifference) {
    testing::TempDir temp;
    testing::copy_tree(parallel_fixture("tp2_dp2_z1_fp32"), temp.path() + "/ckpt");
    run::RunPlan plan = run_plan_of(temp.path() + "/ckpt", 1);
    const std::string name = "language_model.encoder.layers.1.input_layernorm.bias";
    const plan::PlannedTensor* tensor = nullptr;
    for (const auto& t : plan.tensors.tensors) {
        if (t.name == name)
            tensor = &t;
    }
    ASSERT_NE(tensor, nullptr);
    ASSERT_EQ(tensor->pieces.size(), 1u);
    // Element 3 of TP rank 1's copy: +0.25; element 5: +0.5 (the largest).
    for (auto [element, delta] : {std::pair{3, 0.25f}, std::pair{5, 0.5f}}) {
        const SourceExtent at = plan::slice_stream(tensor->pieces[0].sources[1],
                                                   4 * static_cast<std::uint64_t>(element), 4)
                                    .front();
        const std::string path = plan.tensors.inputs[at.file].path;
        std::vector<std::byte> bytes = testing::read_file_bytes(path);
        float value;
        std::memcpy(&value, &bytes[at.offset], 4);
        value += delta;
        std::memcpy(&bytes[at.offset], &value, 4);
        testing::write_file_bytes(path, bytes);
    }

    io::InputFiles inputs(plan.tensors.inputs, 16);
    std::vector<std::string> mismatches = driver::check_replicas_of(plan, 0, inputs, 1 << 16);
    ASSERT_EQ(mismatches.size(), 1u);
    const std::string& message = mismatches[0];
    EXPECT_NE(message.find("'" + name + "'"), std::string::npos) << message;
    EXPECT_NE(message.find("mp_rank_00_optim_states.pt"), std::string::npos) << message;
    EXPECT_NE(message.find("mp_rank_01_optim_states.pt"), std::string::npos) << message;
    EXPECT_NE(message.find("largest difference 0.5"), std::string::npos) << message;
    EXPECT_NE(message.find("at element 5"), std::string::npos) << message;
    EXPECT_NE(message.find("--tp-replicated first"), std::string::npos) << message;
}

// Pieces of several rows: the element named is the tensor's, and bytes between strided rows are
// not compared.
TEST(ReplicaCheck, RowsOfPiecesMapToTensorElements) {
    testing::TempDir temp;
    auto floats = [&](const std::string& name, std::vector<float> values) {
        std::vector<std::byte> bytes(values.size() * 4);
        std::memcpy(bytes.data(), values.data(), bytes.size());
        testing::write_file_bytes(temp.file(name), bytes);
        return InputFile{temp.file(name), bytes.size()};
    };
    run::RunPlan plan;
    plan.ranks = 1;
    plan.tensors.inputs = {floats("a", {1, 2, 3, 4, 5, 6, 7, 8}),
                           floats("b", {1, 2, 3, 4.75f, 5, 6, 7, 8}),
                           floats("c", {1, 2, 3, 4, 5, 6.5f, 16, 8})};
    auto tensor = [](const std::string& name, plan::TensorPiece piece) {
        plan::PlannedTensor t;
        t.name = name;
        t.shape = {2, 4};
        t.pieces = {std::move(piece)};
        return t;
    };
    // Columns 2-3 of a [2, 4] tensor from a contiguous 16-byte stream: stream element 3 is
    // tensor element 7.
    plan::TensorPiece contiguous;
    contiguous.combine = plan::PieceCombine::kCheckEqual;
    contiguous.sources = {{{0, 0, 16}}, {{1, 0, 16}}};
    contiguous.offset = 8;
    contiguous.row_bytes = 8;
    contiguous.rows = 2;
    contiguous.stride = 16;
    contiguous.source_stride = 8;
    // Columns 0-1 from every other 8 bytes of a 32-byte stream: stream element 5 is tensor
    // element 5; stream element 6 lies between rows and is never compared.
    plan::TensorPiece strided = contiguous;
    strided.sources = {{{0, 0, 32}}, {{2, 0, 32}}};
    strided.offset = 0;
    strided.source_stride = 16;
    plan.tensors.tensors = {tensor("contiguous", contiguous), tensor("strided", strided)};
    io::InputFiles inputs(plan.tensors.inputs, 4);
    std::vector<std::string> mismatches = driver::check_replicas_of(plan, 0, inputs, 256);
    ASSERT_EQ(mismatches.size(), 2u);
    EXPECT_NE(mismatches[0].find("largest difference 0.75 at element 7"), std::string::npos)
        << mismatches[0];
    EXPECT_NE(mismatches[1].find("largest difference 0.5 at element 5"), std::string::npos)
        << mismatches[1];
}

}  // namespace
}  // namespace z2f
