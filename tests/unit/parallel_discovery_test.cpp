// The file grid of parallel checkpoints: every fixture, and hand-made name sets for each
// inconsistency (docs/parallel-checkpoints.md §1).
#include <gtest/gtest.h>

#include "checkpoint/file_grid.hpp"
#include "zero2fp32/error.hpp"

namespace z2f::checkpoint {
namespace {

std::string fixture(const std::string& name) {
    return std::string(Z2F_TEST_DATA) + "/deepspeed-parallel/" + name;
}

// The message of the error file_grid_from_names throws, or "" when it succeeds.
std::string grid_error(const std::vector<std::string>& names) {
    try {
        file_grid_from_names("/tag", names);
    } catch (const Error& error) {
        return error.what();
    }
    return "";
}

TEST(FileGrid, TensorParallelFixture) {
    FileGrid grid = discover_file_grid(fixture("tp2_dp2_z1_fp32"), "");
    EXPECT_EQ(grid.folder.tag, "global_step2");
    EXPECT_EQ(grid.tp_degree, 2u);
    EXPECT_EQ(grid.pp_degree, 1u);
    EXPECT_EQ(grid.mp_size(), 2u);
    EXPECT_EQ(grid.dp_size(), 2u);
    ASSERT_EQ(grid.optim_files.size(), 2u);
    EXPECT_TRUE(grid.optim_files[1][0].ends_with("zero_pp_rank_0_mp_rank_01_optim_states.pt"));
    EXPECT_FALSE(grid.is_pipeline());
    EXPECT_FALSE(grid.has_experts());
}

TEST(FileGrid, PipelineFixtures) {
    FileGrid zero = discover_file_grid(fixture("pp2_dp2_z1_fp32"), "");
    EXPECT_EQ(zero.pp_degree, 2u);
    EXPECT_EQ(zero.tp_degree, 1u);
    EXPECT_EQ(zero.dp_size(), 2u);
    ASSERT_EQ(zero.layer_files.size(), 6u);  // layer 3 is a function: no file
    EXPECT_EQ(zero.layer_files[3].layer, 4u);
    FileGrid plain = discover_file_grid(fixture("pp2_dp1_z0_fp32"), "");
    EXPECT_EQ(plain.pp_degree, 2u);
    EXPECT_EQ(plain.dp_size(), 0u);
    EXPECT_TRUE(plain.optim_files.empty());
}

TEST(FileGrid, MixtureOfExpertsFixture) {
    FileGrid grid = discover_file_grid(fixture("moe_ep2_dp2_z2_fp32"), "");
    EXPECT_EQ(grid.mp_size(), 1u);
    EXPECT_EQ(grid.dp_size(), 4u);
    ASSERT_EQ(grid.expert_files.size(), 4u);
    EXPECT_EQ(grid.expert_files[2].moe_layer, 0);
    EXPECT_EQ(grid.expert_files[2].expert, 2u);
    ASSERT_EQ(grid.expert_optim_files.size(), 1u);
    EXPECT_EQ(grid.expert_optim_files[0].size(), 2u);
}

TEST(FileGrid, PipelineTimesTensorParallel) {
    FileGrid grid = file_grid_from_names(
        "/tag", {"mp_rank_00_model_states.pt", "mp_rank_01_model_states.pt",
                 "mp_rank_02_model_states.pt", "mp_rank_03_model_states.pt",
                 "layer_00-model_00-model_states.pt", "layer_00-model_01-model_states.pt",
                 "layer_05-model_00-model_states.pt", "layer_05-model_01-model_states.pt"});
    EXPECT_EQ(grid.tp_degree, 2u);
    EXPECT_EQ(grid.pp_degree, 2u);
    EXPECT_EQ(grid.mp_rank(1, 1), 3u);
    EXPECT_TRUE(grid.layer_files_have_tp_rank);
}

TEST(FileGrid, EveryInconsistencyNamesWhatIsMissing) {
    // A hole in the model-parallel ranks.
    EXPECT_NE(grid_error({"mp_rank_00_model_states.pt", "mp_rank_02_model_states.pt"})
                  .find("mp_rank_01_model_states.pt is missing"),
              std::string::npos);
    // A hole in one mp rank's data-parallel files.
    EXPECT_NE(grid_error({"mp_rank_00_model_states.pt", "mp_rank_01_model_states.pt",
                          "zero_pp_rank_0_mp_rank_00_optim_states.pt",
                          "zero_pp_rank_1_mp_rank_00_optim_states.pt",
                          "zero_pp_rank_1_mp_rank_01_optim_states.pt"})
                  .find("zero_pp_rank_0_mp_rank_01_optim_states.pt is missing"),
              std::string::npos);
    // Different data-parallel sizes.
    EXPECT_NE(grid_error({"mp_rank_00_model_states.pt", "mp_rank_01_model_states.pt",
                          "zero_pp_rank_0_mp_rank_00_optim_states.pt",
                          "zero_pp_rank_1_mp_rank_00_optim_states.pt",
                          "zero_pp_rank_0_mp_rank_01_optim_states.pt"})
                  .find("mp rank 01 has 1 optimizer files, mp rank 00 has 2"),
              std::string::npos);
    // A model rank without optimizer files, and optimizer files without a model file.
    EXPECT_NE(grid_error({"mp_rank_00_model_states.pt", "mp_rank_01_model_states.pt",
                          "zero_pp_rank_0_mp_rank_00_optim_states.pt"})
                  .find("no optimizer files for mp rank 01"),
              std::string::npos);
    EXPECT_NE(grid_error({"mp_rank_00_model_states.pt", "zero_pp_rank_0_mp_rank_00_optim_states.pt",
                          "zero_pp_rank_0_mp_rank_01_optim_states.pt"})
                  .find("no mp_rank_01_model_states.pt"),
              std::string::npos);
    // Mixed optimizer prefixes (two runs).
    EXPECT_NE(grid_error({"mp_rank_00_model_states.pt", "zero_pp_rank_0_mp_rank_00_optim_states.pt",
                          "bf16_zero_pp_rank_1_mp_rank_00_optim_states.pt"})
                  .find("mix the name prefixes"),
              std::string::npos);
    // Layer files of both forms; a layer missing one TP rank; a TP count that does not divide.
    EXPECT_NE(grid_error({"mp_rank_00_model_states.pt", "layer_00-model_states.pt",
                          "layer_01-model_00-model_states.pt"})
                  .find("both layer_LL-model_states.pt"),
              std::string::npos);
    EXPECT_NE(grid_error({"mp_rank_00_model_states.pt", "mp_rank_01_model_states.pt",
                          "layer_00-model_00-model_states.pt", "layer_00-model_01-model_states.pt",
                          "layer_01-model_00-model_states.pt"})
                  .find("layer 01 has 1 tensor-parallel files"),
              std::string::npos);
    EXPECT_NE(grid_error({"mp_rank_00_model_states.pt", "mp_rank_01_model_states.pt",
                          "mp_rank_02_model_states.pt", "layer_00-model_00-model_states.pt",
                          "layer_00-model_01-model_states.pt"})
                  .find("stages x TP"),
              std::string::npos);
    // A missing expert; expert optimizer files without expert files.
    EXPECT_NE(
        grid_error({"mp_rank_00_model_states.pt", "layer_0_expert_0_mp_rank_00_model_states.pt",
                    "layer_0_expert_2_mp_rank_00_model_states.pt"})
            .find("layer_0_expert_1_mp_rank_00_model_states.pt is missing"),
        std::string::npos);
    EXPECT_NE(grid_error({"mp_rank_00_model_states.pt", "expp_rank_0_mp_rank_00_optim_states.pt"})
                  .find("expert weights are missing"),
              std::string::npos);
    // Stray names, no model file, a ZeRO-3 TP rank without TP rank 00.
    EXPECT_NE(grid_error({"mp_rank_00_model_states.pt", "old_model_states.pt"})
                  .find("unrecognised checkpoint file name"),
              std::string::npos);
    EXPECT_NE(grid_error({"zero_pp_rank_0_mp_rank_00_optim_states.pt"}).find("no mp_rank_MM"),
              std::string::npos);
    EXPECT_NE(grid_error({"zero_pp_rank_0_mp_rank_01_model_states.pt"})
                  .find("zero_pp_rank_0_mp_rank_00_model_states.pt is missing"),
              std::string::npos);
    // Ignored names stay ignored.
    EXPECT_EQ(grid_error({"mp_rank_00_model_states.pt", "zero_to_fp32.py", "rng_state_0.pth"}), "");
}

TEST(FileGrid, NameGrammarCarriesLayerAndExpert) {
    CheckpointFileName layer = parse_checkpoint_file_name("layer_07-model_01-model_states.pt");
    EXPECT_EQ(layer.role, CheckpointFileRole::kPipelineLayer);
    EXPECT_EQ(layer.layer, 7);
    EXPECT_EQ(layer.mp_rank, 1u);
    EXPECT_TRUE(layer.layer_has_tp_rank);
    CheckpointFileName expert =
        parse_checkpoint_file_name("layer_3_expert_12_mp_rank_00_model_states.pt");
    EXPECT_EQ(expert.layer, 3);
    EXPECT_EQ(expert.expert, 12u);
    EXPECT_EQ(parse_checkpoint_file_name("expert_5_mp_rank_00_model_states.pt").layer, -1);
    EXPECT_EQ(parse_checkpoint_file_name("expp_rank_3_mp_rank_02_optim_states.pt").dp_rank, 3u);
}

}  // namespace
}  // namespace z2f::checkpoint
