// Ulysses sequence parallelism (src/checkpoint/sequence_parallel.hpp): the rule on hand-made
// metadata and names, the real DeepSpeed 0.19.6 run, the names DeepSpeed 0.17 - 0.19.5 gave the
// same files, and the layouts that only look like it.
#include "checkpoint/sequence_parallel.hpp"

#include <filesystem>

#include <gtest/gtest.h>

#include "checkpoint/assemble.hpp"
#include "checkpoint/routing.hpp"
#include "common/errors.hpp"
#include "plan/consolidation.hpp"
#include "support/test_files.hpp"

namespace z2f {
namespace {

namespace fs = std::filesystem;
using checkpoint::CheckpointFiles;
using checkpoint::ModelStatesInfo;

const std::string kUlysses = "../deepspeed-newest/ulysses_sp2_z2_ws2_fp32";

ModelStatesInfo recorded(std::int64_t mp_world_size, std::int64_t tp, std::int64_t pp) {
    ModelStatesInfo model;
    model.mp_world_size = mp_world_size;
    model.tp_degree = tp;
    model.pp_degree = pp;
    return model;
}

std::string error_of(const std::function<void()>& body, ErrorKind* kind = nullptr) {
    try {
        body();
    } catch (const Error& error) {
        if (kind != nullptr)
            *kind = error.kind();
        return error.what();
    }
    return "";
}

TEST(SequenceParallel, TheRecordedDegree) {
    // The Ulysses mpu: no model parallelism, but the tensor-parallel query answers S.
    EXPECT_EQ(checkpoint::recorded_sequence_parallel_degree(recorded(1, 2, 1)), 2);
    EXPECT_EQ(checkpoint::recorded_sequence_parallel_degree(recorded(1, 4, -1)), 4);
    EXPECT_FALSE(checkpoint::records_model_parallelism(recorded(1, 4, 1)));
    // Tensor parallelism records mp_world_size = TP; a plain run 1 and 1; old files nothing.
    EXPECT_EQ(checkpoint::recorded_sequence_parallel_degree(recorded(2, 2, 1)), 1);
    EXPECT_TRUE(checkpoint::records_model_parallelism(recorded(2, 2, 1)));
    EXPECT_EQ(checkpoint::recorded_sequence_parallel_degree(recorded(1, 1, 1)), 1);
    EXPECT_FALSE(checkpoint::records_model_parallelism(recorded(1, 1, 1)));
    EXPECT_EQ(checkpoint::recorded_sequence_parallel_degree(recorded(-1, -1, -1)), 1);
    EXPECT_FALSE(checkpoint::records_model_parallelism(recorded(-1, -1, -1)));
    // Without mp_world_size 1 a tp_degree is tensor parallelism; with a pipeline it is not SP.
    EXPECT_EQ(checkpoint::recorded_sequence_parallel_degree(recorded(-1, 2, 1)), 1);
    EXPECT_TRUE(checkpoint::records_model_parallelism(recorded(-1, 2, 1)));
    EXPECT_EQ(checkpoint::recorded_sequence_parallel_degree(recorded(1, 2, 2)), 1);
    EXPECT_TRUE(checkpoint::records_model_parallelism(recorded(1, 2, 2)));
}

TEST(SequenceParallel, NamesTheShapeOfDeepSpeed019_5) {
    using Names = std::vector<std::string>;
    const Names zero2 = {"latest", "mp_rank_00_model_states.pt",
                         "zero_pp_rank_0_mp_rank_00_optim_states.pt",
                         "zero_pp_rank_1_mp_rank_01_optim_states.pt"};
    EXPECT_TRUE(checkpoint::has_sequence_parallel_names(zero2));
    EXPECT_FALSE(checkpoint::takes_parallel_reader(zero2));
    const Names zero3 = {"bf16_zero_pp_rank_0_mp_rank_00_optim_states.pt",
                         "bf16_zero_pp_rank_1_mp_rank_01_optim_states.pt",
                         "zero_pp_rank_0_mp_rank_00_model_states.pt",
                         "zero_pp_rank_1_mp_rank_01_model_states.pt"};
    EXPECT_TRUE(checkpoint::has_sequence_parallel_names(zero3));
    EXPECT_FALSE(checkpoint::takes_parallel_reader(zero3));
    // DeepSpeed 0.19.6 names every file mp_rank_00: nothing to tell from the names.
    EXPECT_FALSE(checkpoint::has_sequence_parallel_names(
        {"mp_rank_00_model_states.pt", "zero_pp_rank_0_mp_rank_00_optim_states.pt",
         "zero_pp_rank_1_mp_rank_00_optim_states.pt"}));
    // A tensor-parallel grid names each data-parallel rank once per TP rank.
    const Names grid = {"mp_rank_00_model_states.pt", "mp_rank_01_model_states.pt",
                        "zero_pp_rank_0_mp_rank_00_optim_states.pt",
                        "zero_pp_rank_0_mp_rank_01_optim_states.pt"};
    EXPECT_FALSE(checkpoint::has_sequence_parallel_names(grid));
    EXPECT_TRUE(checkpoint::takes_parallel_reader(grid));
    // A model file of mp rank 01, layer or expert files: never sequence parallelism.
    EXPECT_FALSE(checkpoint::has_sequence_parallel_names(
        {"mp_rank_01_model_states.pt", "zero_pp_rank_0_mp_rank_00_optim_states.pt",
         "zero_pp_rank_1_mp_rank_01_optim_states.pt"}));
    EXPECT_FALSE(checkpoint::has_sequence_parallel_names(
        {"layer_01-model_states.pt", "zero_pp_rank_0_mp_rank_00_optim_states.pt",
         "zero_pp_rank_1_mp_rank_01_optim_states.pt"}));
    EXPECT_FALSE(checkpoint::has_sequence_parallel_names(
        {"zero_pp_rank_0_mp_rank_00_model_states.pt", "zero_pp_rank_0_mp_rank_01_model_states.pt",
         "zero_pp_rank_0_mp_rank_00_optim_states.pt",
         "zero_pp_rank_1_mp_rank_01_optim_states.pt"}));
}

CheckpointFiles files_of(std::vector<std::uint64_t> optim_mp_ranks) {
    CheckpointFiles files;
    files.tag_dir = "/ckpt/global_step2";
    files.model_files = {"/ckpt/global_step2/mp_rank_00_model_states.pt"};
    files.model_mp_ranks = {0};
    for (std::size_t r = 0; r < optim_mp_ranks.size(); ++r) {
        files.optim_files.push_back("/ckpt/global_step2/zero_pp_rank_" + std::to_string(r) +
                                    "_mp_rank_0" + std::to_string(optim_mp_ranks[r]) +
                                    "_optim_states.pt");
    }
    files.optim_mp_ranks = std::move(optim_mp_ranks);
    return files;
}

TEST(SequenceParallel, DegreeFromTheMetadataCheckedAgainstTheNames) {
    // 0.19.6: names all 00, degree recorded.
    EXPECT_EQ(checkpoint::resolve_sequence_parallel(files_of({0, 0, 0, 0}), recorded(1, 2, 1)), 2u);
    // 0.19.5: names R mod S, degree recorded.
    EXPECT_EQ(checkpoint::resolve_sequence_parallel(files_of({0, 1, 0, 1}), recorded(1, 2, 1)), 2u);
    EXPECT_EQ(checkpoint::resolve_sequence_parallel(files_of({0, 1, 2, 3}), recorded(1, 4, 1)), 4u);
    // 0.17 - 0.19.4: no degrees recorded, mp_world_size 1; the names give S.
    EXPECT_EQ(
        checkpoint::resolve_sequence_parallel(files_of({0, 1, 2, 0, 1, 2}), recorded(1, -1, -1)),
        3u);
    // Not sequence parallel at all.
    EXPECT_EQ(checkpoint::resolve_sequence_parallel(files_of({0, 0}), recorded(1, 1, 1)), 1u);
    EXPECT_EQ(checkpoint::resolve_sequence_parallel(files_of({0, 0}), recorded(-1, -1, -1)), 1u);

    // Names out of the R mod S order: files of another run.
    std::string message = error_of([] {
        checkpoint::resolve_sequence_parallel(files_of({0, 0, 1, 1}), recorded(1, 2, 1));
    });
    EXPECT_NE(message.find("zero_pp_rank_1_mp_rank_00_optim_states.pt: names model-parallel rank "
                           "0, but in a sequence-parallel run of degree 2"),
              std::string::npos)
        << message;
    // A degree that does not divide the ZeRO world.
    message = error_of([] {
        checkpoint::resolve_sequence_parallel(files_of({0, 0, 0}), recorded(1, 2, 1));
    });
    EXPECT_NE(message.find("a multiple of 2, but the tag folder holds 3 optimizer files"),
              std::string::npos)
        << message;
    // mp ranks in the names of a tensor-parallel run (mp_world_size 2): its files are missing.
    ErrorKind kind = ErrorKind::kInternal;
    message = error_of(
        [] {
            checkpoint::resolve_sequence_parallel(files_of({0, 1}), recorded(2, 2, 1));
        },
        &kind);
    EXPECT_EQ(kind, ErrorKind::kUnsupported);
    EXPECT_NE(message.find("records mp_world_size 2, not the 1 of a sequence-parallel run"),
              std::string::npos)
        << message;
    message = error_of([] {
        checkpoint::resolve_sequence_parallel(files_of({0, 1}), recorded(-1, -1, -1));
    });
    EXPECT_NE(message.find("records no mp_world_size"), std::string::npos) << message;
    // mp ranks in the names while the run records tp_degree 1.
    message = error_of([] {
        checkpoint::resolve_sequence_parallel(files_of({0, 1}), recorded(1, 1, 1));
    });
    EXPECT_NE(message.find("neither a sequence-parallel nor a model-parallel layout"),
              std::string::npos)
        << message;
}

TEST(SequenceParallel, RealUlyssesRunReadsAsDataParallel) {
    const checkpoint::DiscoveredCheckpoint discovered =
        checkpoint::discover_any_checkpoint(testing::fixture_path(kUlysses), "");
    ASSERT_FALSE(discovered.is_parallel());
    const checkpoint::CheckpointMeta meta =
        checkpoint::read_checkpoint_meta(std::get<CheckpointFiles>(discovered.files));
    EXPECT_EQ(meta.sequence_parallel, 2u);
    EXPECT_EQ(meta.world_size, 2u);
    EXPECT_EQ(meta.zero_stage, 2);
    bool noted = false;
    for (const std::string& note : meta.notes)
        noted = noted || note.find("Ulysses sequence parallelism of degree 2") != std::string::npos;
    EXPECT_TRUE(noted);
    EXPECT_EQ(plan::plan_consolidation(meta, {}).plan.tensors.size(), 8u);
}

// A copy of `fixture`'s tag folder in `dir` with `renames` (from -> to) applied.
std::string renamed_copy(const testing::TempDir& dir, const std::string& fixture,
                         const std::vector<std::pair<std::string, std::string>>& renames,
                         const std::vector<std::string>& removed = {}) {
    const std::string copy = dir.file("ckpt");
    testing::copy_tree(testing::fixture_path(fixture), copy);
    for (const auto& [from, to] : renames)
        fs::rename(copy + "/global_step2/" + from, copy + "/global_step2/" + to);
    for (const std::string& name : removed)
        fs::remove(copy + "/global_step2/" + name);
    return copy;
}

TEST(SequenceParallel, TheNamesOfDeepSpeed019_5ReadTheSame) {
    // DeepSpeed 0.19.5 wrote the same files, rank 1's optimizer file under its SP rank.
    testing::TempDir dir;
    const std::string old = renamed_copy(dir, kUlysses,
                                         {{"zero_pp_rank_1_mp_rank_00_optim_states.pt",
                                           "zero_pp_rank_1_mp_rank_01_optim_states.pt"}});
    const checkpoint::DiscoveredCheckpoint discovered =
        checkpoint::discover_any_checkpoint(old, "");
    ASSERT_FALSE(discovered.is_parallel());
    const CheckpointFiles& files = std::get<CheckpointFiles>(discovered.files);
    EXPECT_EQ(files.optim_mp_ranks, (std::vector<std::uint64_t>{0, 1}));
    const checkpoint::CheckpointMeta meta = checkpoint::read_checkpoint_meta(files);
    EXPECT_EQ(meta.sequence_parallel, 2u);
    const checkpoint::CheckpointMeta real = checkpoint::read_checkpoint_meta(
        checkpoint::discover_checkpoint(testing::fixture_path(kUlysses), ""));
    const auto ours = plan::plan_consolidation(meta, {}).plan.tensors;
    const auto theirs = plan::plan_consolidation(real, {}).plan.tensors;
    ASSERT_EQ(ours.size(), theirs.size());
    for (std::size_t i = 0; i < ours.size(); ++i) {
        EXPECT_EQ(ours[i].name, theirs[i].name);
        EXPECT_EQ(ours[i].extents, theirs[i].extents);
    }
}

TEST(SequenceParallel, LayoutsThatOnlyLookLikeItAreRefused) {
    // A run that records no sequence parallelism (DeepSpeed 0.19.6, tp_degree 1) with a file
    // renamed to mp rank 01.
    {
        testing::TempDir dir;
        const std::string copy = renamed_copy(dir, "../deepspeed-newest/muon_z1_ws2_fp32",
                                              {{"zero_pp_rank_1_mp_rank_00_optim_states.pt",
                                                "zero_pp_rank_1_mp_rank_01_optim_states.pt"}});
        std::string message = error_of(
            [&] { checkpoint::read_checkpoint_meta(checkpoint::discover_checkpoint(copy, "")); });
        EXPECT_NE(message.find("zero_pp_rank_1_mp_rank_01_optim_states.pt"), std::string::npos)
            << message;
        EXPECT_NE(message.find("neither a sequence-parallel nor a model-parallel layout"),
                  std::string::npos)
            << message;
    }
    // A TP 2 x DP 2 run missing half its files, the rest in the sequence-parallel shape.
    {
        testing::TempDir dir;
        const std::string copy =
            renamed_copy(dir, "../deepspeed-parallel/tp2_dp2_z1_fp32", {},
                         {"mp_rank_01_model_states.pt", "zero_pp_rank_1_mp_rank_00_optim_states.pt",
                          "zero_pp_rank_0_mp_rank_01_optim_states.pt"});
        const checkpoint::DiscoveredCheckpoint discovered =
            checkpoint::discover_any_checkpoint(copy, "");
        ASSERT_FALSE(discovered.is_parallel());
        ErrorKind kind = ErrorKind::kInternal;
        std::string message = error_of(
            [&] { checkpoint::read_checkpoint_meta(std::get<CheckpointFiles>(discovered.files)); },
            &kind);
        EXPECT_EQ(kind, ErrorKind::kUnsupported);
        EXPECT_NE(message.find("records mp_world_size 2"), std::string::npos) << message;
        EXPECT_NE(message.find("other ranks' files are missing"), std::string::npos) << message;
    }
}

}  // namespace
}  // namespace z2f
