#include "checkpoint/discovery.hpp"

#include <algorithm>
#include <filesystem>

#include <gtest/gtest.h>

#include "checkpoint/natural_sort.hpp"
#include "common/errors.hpp"
#include "support/test_files.hpp"

namespace z2f {
namespace {

using testing::TempDir;

TEST(NaturalSort, NumbersCompareByValue) {
    EXPECT_TRUE(
        checkpoint::natural_less("zero_pp_rank_2_mp_rank_00", "zero_pp_rank_10_mp_rank_00"));
    EXPECT_FALSE(
        checkpoint::natural_less("zero_pp_rank_10_mp_rank_00", "zero_pp_rank_2_mp_rank_00"));
    EXPECT_TRUE(checkpoint::natural_less("a9", "a10"));
    EXPECT_FALSE(checkpoint::natural_less("a007", "a7"));  // equal keys
    EXPECT_FALSE(checkpoint::natural_less("a7", "a007"));
    EXPECT_TRUE(checkpoint::natural_less("a", "a0"));  // shorter run list first
    EXPECT_TRUE(checkpoint::natural_less("a1b", "a1c"));
    EXPECT_TRUE(checkpoint::natural_less("1", "a"));  // "" < "a" as the leading text run
    EXPECT_TRUE(checkpoint::natural_less("x99999999999999999999999", "x100000000000000000000000"));
    EXPECT_TRUE(checkpoint::natural_less("bf16_zero_pp_rank_9", "bf16_zero_pp_rank_11"));
    std::vector<std::string> names = {"r_10", "r_1", "r_2", "r_0", "r_100", "r_20"};
    std::sort(names.begin(), names.end(),
              [](const auto& a, const auto& b) { return checkpoint::natural_less(a, b); });
    EXPECT_EQ(names, (std::vector<std::string>{"r_0", "r_1", "r_2", "r_10", "r_20", "r_100"}));
}

TEST(CheckpointFileName, Grammar) {
    auto optim =
        checkpoint::parse_checkpoint_file_name("bf16_zero_pp_rank_12_mp_rank_00_optim_states.pt");
    EXPECT_EQ(optim.role, checkpoint::CheckpointFileRole::kOptimStates);
    EXPECT_EQ(optim.dp_rank, 12u);
    EXPECT_EQ(optim.mp_rank, 0u);
    EXPECT_EQ(optim.prefix, "bf16_");
    EXPECT_EQ(
        checkpoint::parse_checkpoint_file_name("fp16_zero_pp_rank_0_mp_rank_00_optim_states.pt")
            .prefix,
        "fp16_");
    EXPECT_EQ(
        checkpoint::parse_checkpoint_file_name("zero_pp_rank_0_mp_rank_01_optim_states.pt").mp_rank,
        1u);
    EXPECT_EQ(checkpoint::parse_checkpoint_file_name("mp_rank_00_model_states.pt").role,
              checkpoint::CheckpointFileRole::kModelStates);
    EXPECT_EQ(
        checkpoint::parse_checkpoint_file_name("zero_pp_rank_3_mp_rank_00_model_states.pt").role,
        checkpoint::CheckpointFileRole::kRankModelStates);
    EXPECT_EQ(checkpoint::parse_checkpoint_file_name("layer_01-model_states.pt").role,
              checkpoint::CheckpointFileRole::kPipelineLayer);
    EXPECT_EQ(checkpoint::parse_checkpoint_file_name("layer_01-model_00-model_states.pt").role,
              checkpoint::CheckpointFileRole::kPipelineLayer);
    EXPECT_EQ(
        checkpoint::parse_checkpoint_file_name("layer_3_expert_5_mp_rank_00_model_states.pt").role,
        checkpoint::CheckpointFileRole::kExpertModelStates);
    EXPECT_EQ(checkpoint::parse_checkpoint_file_name("expert_5_mp_rank_00_model_states.pt").role,
              checkpoint::CheckpointFileRole::kExpertModelStates);
    EXPECT_EQ(checkpoint::parse_checkpoint_file_name("expp_rank_1_mp_rank_00_optim_states.pt").role,
              checkpoint::CheckpointFileRole::kExpertOptimStates);
    // mp needs two digits; other *_states.pt names are unrecognised, anything else ignored.
    EXPECT_EQ(
        checkpoint::parse_checkpoint_file_name("zero_pp_rank_0_mp_rank_0_optim_states.pt").role,
        checkpoint::CheckpointFileRole::kUnrecognizedStates);
    EXPECT_EQ(checkpoint::parse_checkpoint_file_name("old_optim_states.pt").role,
              checkpoint::CheckpointFileRole::kUnrecognizedStates);
    EXPECT_EQ(checkpoint::parse_checkpoint_file_name("zero_to_fp32.py").role,
              checkpoint::CheckpointFileRole::kOther);
    EXPECT_EQ(checkpoint::parse_checkpoint_file_name("rng_state_0.pth").role,
              checkpoint::CheckpointFileRole::kOther);
    EXPECT_EQ(checkpoint::parse_checkpoint_file_name(
                  "zero_pp_rank_99999999999999999999999_mp_rank_00_optim_states.pt")
                  .role,
              checkpoint::CheckpointFileRole::kUnrecognizedStates);
}

// A fake tag folder: files only need the right names for discovery.
struct FakeCheckpoint {
    TempDir dir;
    std::string tag_dir;
    explicit FakeCheckpoint(const std::vector<std::string>& files,
                            const std::string& tag = "global_step7") {
        tag_dir = dir.file(tag);
        std::filesystem::create_directories(tag_dir);
        for (const auto& name : files)
            testing::write_text_file(tag_dir + "/" + name, "x");
        testing::write_text_file(dir.file("latest"), tag + "\n");
    }
};

std::string discovery_error(const std::string& dir, const std::string& tag = "") {
    try {
        checkpoint::discover_checkpoint(dir, tag);
    } catch (const Error& error) {
        return error.what();
    }
    return "";
}

TEST(Discovery, RankOrderIsNumeric) {
    std::vector<std::string> files = {"mp_rank_00_model_states.pt"};
    for (int r = 0; r < 12; ++r)
        files.push_back("bf16_zero_pp_rank_" + std::to_string(r) + "_mp_rank_00_optim_states.pt");
    FakeCheckpoint ckpt(files);
    checkpoint::CheckpointFiles found = checkpoint::discover_checkpoint(ckpt.dir.path(), "");
    EXPECT_EQ(found.tag, "global_step7");
    ASSERT_EQ(found.optim_files.size(), 12u);
    EXPECT_NE(found.optim_files[2].find("rank_2_"), std::string::npos);
    EXPECT_NE(found.optim_files[10].find("rank_10_"), std::string::npos);
    EXPECT_EQ(found.optim_prefix, "bf16_");
    EXPECT_FALSE(found.per_rank_model_files);
}

TEST(Discovery, LatestIsStrippedAndTagsCanBeChosen) {
    FakeCheckpoint ckpt(
        {"mp_rank_00_model_states.pt", "zero_pp_rank_0_mp_rank_00_optim_states.pt"});
    testing::write_text_file(ckpt.dir.file("latest"), "  global_step7 \r\n");
    EXPECT_EQ(checkpoint::discover_checkpoint(ckpt.dir.path(), "").tag, "global_step7");
    EXPECT_EQ(checkpoint::discover_checkpoint(ckpt.dir.path(), "global_step7").tag, "global_step7");
    EXPECT_NE(discovery_error(ckpt.dir.path(), "global_step8")
                  .find("tag folder 'global_step8' does not exist (tags here: global_step7)"),
              std::string::npos);
    EXPECT_NE(discovery_error(ckpt.dir.path(), "../etc").find("is not a folder name"),
              std::string::npos);
    testing::write_text_file(ckpt.dir.file("latest"), "global_step9");
    EXPECT_NE(discovery_error(ckpt.dir.path()).find("names tag 'global_step9', but the folder"),
              std::string::npos);
    std::filesystem::remove(ckpt.dir.file("latest"));
    EXPECT_NE(discovery_error(ckpt.dir.path()).find("no 'latest' file"), std::string::npos);
}

TEST(Discovery, RefusesIncompleteOrMixedGrids) {
    {
        FakeCheckpoint ckpt({"mp_rank_00_model_states.pt",
                             "zero_pp_rank_0_mp_rank_00_optim_states.pt",
                             "zero_pp_rank_2_mp_rank_00_optim_states.pt"});
        EXPECT_NE(discovery_error(ckpt.dir.path()).find("optimizer file of rank 1 is missing"),
                  std::string::npos);
    }
    {
        FakeCheckpoint ckpt({"mp_rank_00_model_states.pt",
                             "zero_pp_rank_0_mp_rank_00_optim_states.pt",
                             "bf16_zero_pp_rank_1_mp_rank_00_optim_states.pt"});
        EXPECT_NE(discovery_error(ckpt.dir.path()).find("mix the name prefixes"),
                  std::string::npos);
    }
    {
        FakeCheckpoint ckpt({"mp_rank_00_model_states.pt", "mp_rank_01_model_states.pt",
                             "zero_pp_rank_0_mp_rank_00_optim_states.pt",
                             "zero_pp_rank_0_mp_rank_01_optim_states.pt"});
        std::string message = discovery_error(ckpt.dir.path());
        EXPECT_NE(message.find("model-parallel rank 1"), std::string::npos) << message;
    }
    {
        FakeCheckpoint ckpt({"mp_rank_00_model_states.pt"});
        EXPECT_NE(discovery_error(ckpt.dir.path()).find("no *_optim_states.pt files"),
                  std::string::npos);
    }
    {
        FakeCheckpoint ckpt({"zero_pp_rank_0_mp_rank_00_optim_states.pt"});
        EXPECT_NE(discovery_error(ckpt.dir.path()).find("no *_model_states.pt file"),
                  std::string::npos);
    }
    {
        FakeCheckpoint ckpt({"mp_rank_00_model_states.pt",
                             "zero_pp_rank_0_mp_rank_00_model_states.pt",
                             "zero_pp_rank_0_mp_rank_00_optim_states.pt"});
        EXPECT_NE(discovery_error(ckpt.dir.path()).find("holds both"), std::string::npos);
    }
    {
        FakeCheckpoint ckpt({"mp_rank_00_model_states.pt",
                             "zero_pp_rank_0_mp_rank_00_optim_states.pt", "stale_optim_states.pt"});
        EXPECT_NE(discovery_error(ckpt.dir.path()).find("unrecognised checkpoint file name"),
                  std::string::npos);
    }
}

TEST(Discovery, LeavesParallelLayoutsToTheParallelReader) {
    {
        FakeCheckpoint ckpt({"mp_rank_00_model_states.pt",
                             "zero_pp_rank_0_mp_rank_00_optim_states.pt",
                             "layer_01-model_states.pt"});
        std::string message = discovery_error(ckpt.dir.path());
        EXPECT_NE(message.find("pipeline-parallel"), std::string::npos);
        EXPECT_NE(message.find("discover_file_grid"), std::string::npos);
    }
    {
        FakeCheckpoint ckpt({"mp_rank_00_model_states.pt",
                             "zero_pp_rank_0_mp_rank_00_optim_states.pt",
                             "layer_0_expert_0_mp_rank_00_model_states.pt"});
        EXPECT_NE(discovery_error(ckpt.dir.path()).find("Mixture-of-Experts"), std::string::npos);
    }
}

TEST(Discovery, DirectoryWhereAFileShouldBe) {
    FakeCheckpoint ckpt({"mp_rank_00_model_states.pt"});
    std::filesystem::create_directories(ckpt.tag_dir +
                                        "/zero_pp_rank_0_mp_rank_00_optim_states.pt");
    EXPECT_NE(discovery_error(ckpt.dir.path()).find("is a directory, expected a file"),
              std::string::npos);
}

TEST(Discovery, MissingOrNonDirectoryCheckpoint) {
    TempDir dir;
    EXPECT_NE(discovery_error(dir.file("nope")).find("does not exist"), std::string::npos);
    testing::write_text_file(dir.file("plain"), "x");
    EXPECT_NE(discovery_error(dir.file("plain")).find("is not a directory"), std::string::npos);
}

TEST(Discovery, HuggingFaceSideFiles) {
    TempDir dir;
    for (const char* name : {"config.json", "tokenizer.json", "tokenizer_config.json",
                             "special_tokens_map.json", "chat_template.jinja",
                             "generation_config.json", "trainer_state.json", "rng_state_0.pth"}) {
        testing::write_text_file(dir.file(name), "{}");
    }
    EXPECT_EQ(checkpoint::find_hf_side_files(dir.path()),
              (std::vector<std::string>{"chat_template.jinja", "config.json",
                                        "generation_config.json", "special_tokens_map.json",
                                        "tokenizer.json", "tokenizer_config.json"}));
}

TEST(Discovery, BundledFixtures) {
    checkpoint::CheckpointFiles z3 =
        checkpoint::discover_checkpoint(testing::fixture_path("z3_ws4_fp32"), "");
    EXPECT_TRUE(z3.per_rank_model_files);
    EXPECT_EQ(z3.model_files.size(), 4u);
    EXPECT_EQ(z3.optim_files.size(), 4u);
    checkpoint::CheckpointFiles multitag =
        checkpoint::discover_checkpoint(testing::fixture_path("z2_ws2_multitag_fp32"), "");
    EXPECT_EQ(multitag.tag, "global_step3");
}

}  // namespace
}  // namespace z2f
