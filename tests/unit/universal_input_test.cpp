// Universal checkpoints as input: which folder discovery takes, and the tensors planned from
// DeepSpeed's own universal checkpoints (tests/data/universal plus the model-states copies)
// against the engine's state dict (tests/data/deepspeed/<fixture>/expected.pt).
#include <filesystem>

#include <gtest/gtest.h>

#include "checkpoint/assemble.hpp"
#include "checkpoint/discovery.hpp"
#include "checkpoint/meta_codec.hpp"
#include "checkpoint/routing.hpp"
#include "checkpoint/universal_assemble.hpp"
#include "checkpoint/universal_discovery.hpp"
#include "plan/consolidation.hpp"
#include "plan/universal_plan.hpp"
#include "support/expected_state.hpp"
#include "support/materialize.hpp"
#include "support/test_files.hpp"
#include "support/universal_reference.hpp"
#include "zero2fp32/error.hpp"
#include "zero2fp32/plan.hpp"

namespace z2f::checkpoint {
namespace {

namespace fs = std::filesystem;

std::string discovery_error(const std::string& dir, const std::string& tag,
                            DiscoveryOptions options = {}) {
    try {
        discover_checkpoint(dir, tag, options);
    } catch (const Error& error) {
        return error.what();
    }
    return "";
}

// Which reader routing gives the folder: true for the universal one.
bool routed_universal(const std::string& dir, const std::string& tag,
                      DiscoveryOptions options = {}) {
    return std::holds_alternative<UniversalFolder>(
        discover_any_checkpoint(dir, tag, options).files);
}

TEST(UniversalInput, DiscoveryFollowsLatestUniversal) {
    testing::TempDir dir;
    testing::assemble_universal_checkpoint("z2_ws2_fp32", dir.path());
    EXPECT_TRUE(routed_universal(dir.path(), ""));
    const UniversalFolder universal = discover_universal_checkpoint(dir.path(), "");
    const CheckpointFiles& files = universal.files;
    EXPECT_EQ(files.tag, "global_step2_universal");
    EXPECT_TRUE(files.optim_files.empty());
    ASSERT_EQ(files.model_files.size(), 1u);
    EXPECT_EQ(fs::path(files.model_files[0]).filename(), "mp_rank_00_model_states.pt");
    EXPECT_EQ(universal.params,
              (std::vector<std::string>{"fc1.bias", "fc1.weight", "fc2.bias", "fc2.weight",
                                        "norm.bias", "norm.weight", "scale", "temp"}));
    // The tag folder itself, and -t.
    EXPECT_TRUE(routed_universal(dir.file("global_step2_universal"), ""));
    EXPECT_TRUE(routed_universal(dir.path(), "global_step2_universal"));
    // The ZeRO reader is never given one.
    EXPECT_THROW(discover_checkpoint(dir.path(), ""), Error);
    // The folder crosses MPI whole, alone and as the routed payload.
    const UniversalFolder decoded = decode_universal_folder(encode_universal_folder(universal));
    EXPECT_EQ(decoded.files.tag_dir, files.tag_dir);
    EXPECT_EQ(decoded.files.model_files, files.model_files);
    EXPECT_EQ(decoded.params, universal.params);
    const DiscoveredCheckpoint routed =
        decode_discovered(encode_discovered(discover_any_checkpoint(dir.path(), "")));
    ASSERT_TRUE(std::holds_alternative<UniversalFolder>(routed.files));
    EXPECT_EQ(std::get<UniversalFolder>(routed.files).params, universal.params);
    EXPECT_EQ(routed.tag_dir(), files.tag_dir);
}

TEST(UniversalInput, LatestWinsUnlessAskedOtherwise) {
    // DeepSpeed's converter writes its output next to the original: both latest files.
    testing::TempDir dir;
    testing::copy_tree(testing::fixture_path("z2_ws2_fp32"), dir.path());
    testing::assemble_universal_checkpoint("z2_ws2_fp32", dir.path() + "/universal");
    fs::rename(dir.file("universal/global_step2_universal"), dir.file("global_step2_universal"));
    fs::rename(dir.file("universal/latest_universal"), dir.file("latest_universal"));
    EXPECT_FALSE(routed_universal(dir.path(), ""));
    CheckpointFiles plain = discover_checkpoint(dir.path(), "");
    EXPECT_EQ(plain.tag, "global_step2");
    DiscoveryOptions from_universal;
    from_universal.from_universal = true;
    EXPECT_TRUE(routed_universal(dir.path(), "", from_universal));
    UniversalFolder universal = discover_universal_checkpoint(dir.path(), "", from_universal);
    EXPECT_EQ(universal.files.tag, "global_step2_universal");
    EXPECT_TRUE(routed_universal(dir.path(), "global_step2_universal"));
    EXPECT_FALSE(routed_universal(dir.path(), "global_step2"));

    fs::remove(dir.file("latest_universal"));
    EXPECT_NE(discovery_error(dir.path(), "", from_universal).find("no 'latest_universal'"),
              std::string::npos);
}

TEST(UniversalInput, AFolderWithoutOptimizerStateIsNotUniversal) {
    testing::TempDir dir;
    testing::assemble_universal_checkpoint("z3_ws2_fp32", dir.path());
    fs::remove(dir.file("global_step2_universal/zero/optimizer_state.pt"));
    EXPECT_FALSE(is_universal_tag_dir(dir.file("global_step2_universal")));
    EXPECT_NE(discovery_error(dir.path(), "").find("no *_optim_states.pt files"), std::string::npos)
        << discovery_error(dir.path(), "");
}

// Defaults: every tensor of the engine's own state dict, bit for bit.
TEST(UniversalInput, PlansTheEnginesStateDict) {
    for (const std::string& fixture : testing::universal_fixtures()) {
        SCOPED_TRACE(fixture);
        testing::TempDir dir;
        testing::assemble_universal_checkpoint(fixture, dir.path());
        CheckpointMeta meta =
            read_universal_checkpoint_meta(discover_universal_checkpoint(dir.path(), ""));
        EXPECT_EQ(meta.layout, MasterLayout::kWholeParams);
        EXPECT_EQ(meta.world_size, 2u);
        plan::ConsolidationPlan result = plan::plan_consolidation(meta, plan::PlanOptions{});
        auto expected =
            testing::read_expected_state_dict(testing::fixture_path(fixture + "/expected.pt"));
        ASSERT_EQ(result.plan.tensors.size(), expected.size());
        for (std::size_t i = 0; i < result.plan.tensors.size(); ++i) {
            const plan::PlannedTensor& tensor = result.plan.tensors[i];
            SCOPED_TRACE(tensor.name);
            const testing::ExpectedTensor* truth = testing::find_tensor(expected, tensor.name);
            ASSERT_NE(truth, nullptr);
            EXPECT_EQ(tensor.shape, truth->shape);  // 'temp' is () again
            EXPECT_EQ(tensor.output_dtype, truth->dtype);
            EXPECT_EQ(testing::materialize(result.plan, i), truth->bytes);
            if (tensor.role == TensorRole::kTrainable) {
                EXPECT_EQ(tensor.extents.size(), 1u);  // one whole record
            }
        }
        // And the same order as the original checkpoint's plan.
        plan::ConsolidationPlan original = plan::plan_consolidation(
            read_checkpoint_meta(discover_checkpoint(testing::fixture_path(fixture), "")),
            plan::PlanOptions{});
        ASSERT_EQ(original.plan.tensors.size(), result.plan.tensors.size());
        for (std::size_t i = 0; i < result.plan.tensors.size(); ++i) {
            EXPECT_EQ(result.plan.tensors[i].name, original.plan.tensors[i].name);
            EXPECT_EQ(result.plan.tensors[i].role, original.plan.tensors[i].role);
        }
        // A universal checkpoint is not converted to a universal checkpoint again.
        EXPECT_THROW(plan::plan_universal(meta), Error);
    }
}

TEST(UniversalInput, ParameterFilesAreChecked) {
    testing::TempDir dir;
    testing::assemble_universal_checkpoint("z2_ws2_fp32", dir.path());
    const std::string zero = dir.file("global_step2_universal/zero");
    // A parameter of param_shapes without its folder.
    fs::remove_all(zero + "/fc2.bias");
    try {
        read_universal_checkpoint_meta(discover_universal_checkpoint(dir.path(), ""));
        ADD_FAILURE() << "assembled without fc2.bias";
    } catch (const Error& error) {
        EXPECT_EQ(error.kind(), ErrorKind::kInput);
        EXPECT_NE(std::string(error.what()).find("fc2.bias/fp32.pt: is missing"), std::string::npos)
            << error.what();
    }
    // A folder holding another parameter's tensor (wrong element count).
    fs::create_directory(zero + "/fc2.bias");
    fs::copy_file(zero + "/fc1.bias/fp32.pt", zero + "/fc2.bias/fp32.pt");
    try {
        read_universal_checkpoint_meta(discover_universal_checkpoint(dir.path(), ""));
        ADD_FAILURE() << "assembled a 53-element fc2.bias";
    } catch (const Error& error) {
        EXPECT_NE(std::string(error.what())
                      .find("holds 53 elements, but parameter 'fc2.bias' "
                            "has 29"),
                  std::string::npos)
            << error.what();
    }
}

// Universal checkpoints of tensor- and pipeline-parallel runs, ours and DeepSpeed's alike (its
// ref/universal trees are the same files but for the vocabulary's storage): one model-states
// file per model-parallel rank, merged shapes from the parameter files, the engine's weights with
// the vocabulary stripped, in the order of the original's own conversion.
TEST(UniversalInput, TensorAndPipelineParallelUniversalCheckpoints) {
    for (const std::string& fixture : testing::parallel_universal_fixtures()) {
        SCOPED_TRACE(fixture);
        const UniversalFolder universal =
            discover_universal_checkpoint(testing::parallel_universal_reference(fixture), "");
        const CheckpointFiles& files = universal.files;
        ASSERT_EQ(files.model_files.size(), 2u);
        EXPECT_FALSE(files.per_rank_model_files);
        EXPECT_TRUE(files.model_files[1].ends_with("/mp_rank_01_model_states.pt"));
        const CheckpointMeta meta = read_universal_checkpoint_meta(universal);
        plan::ConsolidationPlan result = plan::plan_consolidation(meta, plan::PlanOptions{});
        auto expected = testing::read_expected_state_dict(testing::parallel_fixture_dir(fixture) +
                                                          "/expected.pt");
        ASSERT_EQ(result.plan.tensors.size(), expected.size());
        for (std::size_t i = 0; i < expected.size(); ++i) {
            const plan::PlannedTensor& tensor = result.plan.tensors[i];
            SCOPED_TRACE(expected[i].name);
            EXPECT_EQ(tensor.name, expected[i].name);
            EXPECT_EQ(tensor.role, TensorRole::kTrainable);
            std::vector<std::uint64_t> shape = expected[i].shape;
            if (tensor.name == "language_model.embedding.word_embeddings.weight")
                shape[0] = 50;  // original_vocab_size
            EXPECT_EQ(tensor.shape, shape);
            const std::vector<std::byte> bytes = testing::materialize(result.plan, i);
            ASSERT_LE(bytes.size(), expected[i].bytes.size());
            EXPECT_TRUE(std::equal(bytes.begin(), bytes.end(), expected[i].bytes.begin()));
        }
    }
}

TEST(UniversalInput, ModelParallelRanksAreChecked) {
    const std::string fixture = "tp2_dp2_z1_fp32";
    auto error_of = [](const std::string& dir) -> std::pair<ErrorKind, std::string> {
        try {
            read_universal_checkpoint_meta(discover_universal_checkpoint(dir, ""));
        } catch (const Error& error) {
            return {error.kind(), error.what()};
        }
        return {ErrorKind::kInternal, "no error"};
    };
    {
        // TP rank 0's file missing: a hole in the ranks.
        testing::TempDir dir;
        testing::copy_tree(testing::parallel_universal_reference(fixture), dir.path());
        fs::remove(dir.file("global_step2_universal/mp_rank_00_model_states.pt"));
        auto [kind, message] = error_of(dir.path());
        EXPECT_EQ(kind, ErrorKind::kInput);
        EXPECT_NE(message.find("model-parallel rank 0 is missing"), std::string::npos) << message;
    }
    {
        // TP rank 1's file missing: mp_rank_00 alone records mp_world_size 2.
        testing::TempDir dir;
        testing::copy_tree(testing::parallel_universal_reference(fixture), dir.path());
        fs::remove(dir.file("global_step2_universal/mp_rank_01_model_states.pt"));
        auto [kind, message] = error_of(dir.path());
        EXPECT_EQ(kind, ErrorKind::kUnsupported);
        EXPECT_NE(message.find("missing"), std::string::npos) << message;
    }
    {
        // A frozen parameter among TP rank 0's module slices cannot be merged without the rules.
        const UniversalFolder universal =
            discover_universal_checkpoint(testing::parallel_universal_reference(fixture), "");
        std::vector<FileMeta> metas;
        const std::vector<InputFileSpec> inputs = universal_inputs(universal);
        for (std::size_t i = 0; i < inputs.size(); ++i)
            metas.push_back(read_file_meta(inputs[i], static_cast<std::uint32_t>(i)));
        EXPECT_EQ(inputs[1].kind, InputKind::kModelParallelRank);
        auto& model = std::get<ModelFile>(metas[0].info).states;
        NamedTensor frozen = model.module_tensors.front();
        frozen.name = "language_model.frozen_table.weight";
        model.module_tensors.push_back(frozen);
        try {
            assemble_universal_meta(universal, std::move(metas));
            ADD_FAILURE() << "assembled a frozen TP parameter";
        } catch (const Error& error) {
            EXPECT_EQ(error.kind(), ErrorKind::kUnsupported);
            EXPECT_NE(std::string(error.what()).find("frozen"), std::string::npos) << error.what();
        }
    }
}

}  // namespace
}  // namespace z2f::checkpoint
