// Interpretation of the parallel fixtures' pickles and the round trip of their metadata through
// the wire codec.
#include <gtest/gtest.h>

#include "checkpoint/meta_codec.hpp"
#include "checkpoint/parallel_assemble.hpp"
#include "zero2fp32/error.hpp"

namespace z2f::checkpoint {
namespace {

std::string fixture(const std::string& name) {
    return std::string(Z2F_TEST_DATA) + "/deepspeed-parallel/" + name;
}

TEST(ParallelMeta, UniversalCheckpointInfoAndNamespaceArgs) {
    FileGrid grid = discover_file_grid(fixture("tp2_dp2_z1_fp32"), "");
    // `args` is an argparse.Namespace: it loads as an inert object.
    FileMeta meta = read_file_meta({grid.model_files[1], InputKind::kGridModel}, 1);
    const auto& model = std::get<ModelFile>(meta.info);
    ASSERT_TRUE(model.extras.universal_info.has_value());
    const UniversalCheckpointInfo& info = *model.extras.universal_info;
    EXPECT_DOUBLE_EQ(info.version, 0.2);
    EXPECT_EQ(info.padded_vocab_size, 52);
    EXPECT_EQ(info.vocabulary,
              (std::vector<std::string>{"language_model.embedding.word_embeddings.weight"}));
    EXPECT_EQ(info.row_parallel.size(), 1u);
    EXPECT_EQ(info.two_sub_params_cat_dim_0.size(), 2u);
    EXPECT_FALSE(info.tp_replicated.empty());
    EXPECT_EQ(model.states.mp_world_size, 2);
    EXPECT_EQ(model.states.module_tensors.size(), 16u);
}

TEST(ParallelMeta, SliceMappingsAndMoeGroups) {
    FileGrid grid = discover_file_grid(fixture("moe_ep2_dp2_z2_fp32"), "");
    FileMeta meta = read_file_meta({grid.optim_files[0][2], InputKind::kGridOptim}, 3);
    const auto& optim = std::get<OptimFile>(meta.info);
    EXPECT_EQ(optim.states.partition_count, (std::vector<std::int64_t>{4, 2}));
    ASSERT_EQ(optim.extras.groups.size(), 2u);
    EXPECT_EQ(optim.extras.groups[0].name, "dense-params");
    EXPECT_EQ(optim.extras.groups[1].name, "ep_size_2");
    EXPECT_TRUE(optim.extras.groups[1].moe);
    ASSERT_EQ(optim.extras.groups[1].slices.size(), 4u);
    EXPECT_EQ(optim.extras.groups[1].slices[0],
              (SliceMapping{"moe.deepspeed_moe.experts.deepspeed_experts.1.0.weight", 0, 367}));
}

TEST(ParallelMeta, CodecRoundTripsEveryFixtureFile) {
    for (const char* name :
         {"tp2_dp2_z1_fp32", "pp2_dp2_z1_fp32", "pp2_dp1_z0_fp32", "moe_ep2_dp2_z2_fp32"}) {
        FileGrid grid = discover_file_grid(fixture(name), "");
        EXPECT_EQ(decode_file_grid(encode_file_grid(grid)).model_files, grid.model_files);
        FileGrid decoded_grid = decode_file_grid(encode_file_grid(grid));
        EXPECT_EQ(decoded_grid.layer_files.size(), grid.layer_files.size());
        EXPECT_EQ(decoded_grid.optim_files, grid.optim_files);
        auto inputs = parallel_inputs(grid);
        WireWriter out;
        std::vector<FileMeta> originals;
        for (std::size_t i = 0; i < inputs.size(); ++i) {
            originals.push_back(read_file_meta(inputs[i], static_cast<std::uint32_t>(i)));
            encode_file_meta(originals.back(), out);
        }
        WireReader in(out.bytes(), "test");
        for (const FileMeta& original : originals) {
            EXPECT_EQ(decode_file_meta(in), original) << name;
        }
        EXPECT_TRUE(in.at_end());
        // A truncated payload is an internal error, never a crash.
        std::vector<std::byte> cut(out.bytes().begin(), out.bytes().end() - 3);
        WireReader short_in(cut, "test");
        EXPECT_THROW(
            {
                for (std::size_t i = 0; i < originals.size(); ++i)
                    decode_file_meta(short_in);
            },
            Error);
    }
}

TEST(ParallelMeta, RecordedDegreesMustMatchTheGrid) {
    FileGrid grid = discover_file_grid(fixture("tp2_dp2_z1_fp32"), "");
    auto inputs = parallel_inputs(grid);
    std::vector<FileMeta> metas;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
        metas.push_back(read_file_meta(inputs[i], static_cast<std::uint32_t>(i)));
    }
    auto wrong = metas;
    std::get<ModelFile>(wrong[0].info).states.tp_degree = 4;
    EXPECT_THROW(assemble_parallel_meta(grid, wrong), Error);
    wrong = metas;
    std::get<ModelFile>(wrong[1].info).extras.universal_info->row_parallel.clear();
    EXPECT_THROW(assemble_parallel_meta(grid, wrong), Error);
    EXPECT_NO_THROW(assemble_parallel_meta(grid, metas));
}

}  // namespace
}  // namespace z2f::checkpoint
