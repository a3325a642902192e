#include "checkpoint/meta_codec.hpp"

#include <gtest/gtest.h>

#include "checkpoint/assemble.hpp"
#include "checkpoint/discovery.hpp"
#include "common/errors.hpp"
#include "support/test_files.hpp"

namespace z2f::checkpoint {
namespace {

TEST(MetaCodec, RoundTripsEveryFixtureFile) {
    for (const char* fixture :
         {"z2_ws2_frozen_bf16", "z3_ws2_tied_fp32", "z3_ws2_frozen_bf16", "z1_ws2_bf16opt"}) {
        CheckpointFiles files = discover_checkpoint(testing::fixture_path(fixture), "");
        auto inputs = checkpoint_inputs(files);
        WireWriter out;
        std::vector<FileMeta> originals;
        for (std::size_t i = 0; i < inputs.size(); ++i) {
            originals.push_back(read_file_meta(inputs[i], static_cast<std::uint32_t>(i)));
            encode_file_meta(originals.back(), out);
        }
        WireReader in(out.bytes(), "test");
        for (const FileMeta& original : originals) {
            FileMeta decoded = decode_file_meta(in);
            EXPECT_EQ(decoded.size, original.size);
            EXPECT_EQ(decoded.info, original.info) << fixture;
            EXPECT_EQ(decoded.records, original.records) << fixture;
        }
        // The optimizer files' records, each with the CRC its zip directory records.
        EXPECT_FALSE(originals.back().records.empty()) << fixture;
        for (const InputRecord& record : originals.back().records)
            EXPECT_NE(record.crc32, 0u) << fixture << " " << record.name;
        EXPECT_TRUE(in.at_end());
    }
}

TEST(MetaCodec, RoundTripsTheFileList) {
    CheckpointFiles files = discover_checkpoint(testing::fixture_path("z3_ws2_tied_fp32"), "");
    CheckpointFiles decoded = decode_files(encode_files(files));
    EXPECT_EQ(decoded.checkpoint_dir, files.checkpoint_dir);
    EXPECT_EQ(decoded.tag, files.tag);
    EXPECT_EQ(decoded.tag_dir, files.tag_dir);
    EXPECT_EQ(decoded.model_files, files.model_files);
    EXPECT_EQ(decoded.per_rank_model_files, files.per_rank_model_files);
    EXPECT_EQ(decoded.optim_files, files.optim_files);
    EXPECT_EQ(decoded.optim_prefix, files.optim_prefix);
    EXPECT_EQ(decoded.has_offloaded_tensors, files.has_offloaded_tensors);
}

TEST(MetaCodec, EveryTruncationIsAnInternalError) {
    FileMeta meta;
    OptimStatesInfo optim;
    optim.partition_count = {4};
    optim.master.push_back(TensorRef{3, DType::kF32, {10}, 10, 64, 40});
    meta.info = OptimFile{optim, {}};
    WireWriter out;
    encode_file_meta(meta, out);
    for (std::size_t cut = 0; cut < out.bytes().size(); ++cut) {
        WireReader in(std::span(out.bytes()).first(cut), "test");
        try {
            decode_file_meta(in);
            ADD_FAILURE() << "decoded a buffer cut at " << cut;
        } catch (const Error& error) {
            EXPECT_EQ(error.kind(), ErrorKind::kInternal) << cut;
        }
    }
    std::vector<std::byte> files = encode_files(CheckpointFiles{});
    for (std::size_t cut = 0; cut < files.size(); ++cut) {
        EXPECT_THROW(decode_files(std::span(files).first(cut)), Error) << cut;
    }
    files.push_back(std::byte{0});
    EXPECT_THROW(decode_files(files), Error);  // trailing byte
}

TEST(MetaCodec, OutOfRangeEnumeratorsAreRefused) {
    FileMeta meta;
    OptimStatesInfo optim;
    optim.master.push_back(TensorRef{0, DType::kF32, {1}, 1, 0, 4});
    meta.info = OptimFile{optim, {}};
    WireWriter out;
    encode_file_meta(meta, out);
    std::vector<std::byte> bytes = out.take();
    // u64 size, u8 kind, then the ds_version string (8 bytes of length), then the layout.
    std::size_t layout_at = 8 + 1 + 8;
    bytes[layout_at] = std::byte{4};
    WireReader in(bytes, "test");
    EXPECT_THROW(decode_file_meta(in), Error);
}

OptimStatesInfo optim_with_state() {
    OptimStatesInfo optim;
    optim.partition_count = {2};
    optim.master.push_back(TensorRef{3, DType::kF32, {10}, 10, 64, 40});
    OptimizerGroupState state;
    state.exp_avg = TensorRef{3, DType::kF32, {12}, 12, 128, 48};
    state.step = OptimizerStep{OptimizerStep::Form::kTensor, DType::kF32, {}, 0x40000000};
    optim.group_states.push_back(state);
    PickledGraphBuilder builder(optim.global_state.graph, "test");
    PickledNode key;
    key.kind = PickledNode::Kind::kString;
    key.text = "clip_grad";
    PickledNode value;
    value.kind = PickledNode::Kind::kFloat;
    value.real = 0.5;
    PickledNode groups;
    groups.kind = PickledNode::Kind::kList;
    std::uint32_t key_node = builder.add(key);
    std::uint32_t value_node = builder.add(value);
    groups.children = {value_node, value_node};
    optim.global_state.entries.push_back({"clip_grad", key_node, value_node});
    optim.global_state.param_groups = builder.add(groups);
    return optim;
}

TEST(MetaCodec, RoundTripsTheOptimizerState) {
    FileMeta meta;
    meta.info = OptimFile{optim_with_state(), {}};
    WireWriter out;
    encode_file_meta(meta, out);
    WireReader in(out.bytes(), "test");
    EXPECT_EQ(decode_file_meta(in).info, meta.info);
    EXPECT_TRUE(in.at_end());
    for (std::size_t cut = 0; cut < out.bytes().size(); ++cut) {
        WireReader truncated(std::span(out.bytes()).first(cut), "test");
        EXPECT_THROW(decode_file_meta(truncated), Error) << cut;
    }
}

TEST(MetaCodec, PickledNodesReferOnlyToEarlierNodes) {
    FileMeta meta;
    OptimStatesInfo optim = optim_with_state();
    optim.global_state.graph.nodes[0].children = {2};  // a forward (possibly cyclic) reference
    meta.info = OptimFile{optim, {}};
    WireWriter out;
    encode_file_meta(meta, out);
    WireReader in(out.bytes(), "test");
    try {
        decode_file_meta(in);
        ADD_FAILURE() << "decoded a forward reference";
    } catch (const Error& error) {
        EXPECT_EQ(error.kind(), ErrorKind::kInternal);
    }
}

}  // namespace
}  // namespace z2f::checkpoint
