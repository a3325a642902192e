#include "checkpoint/meta_codec.hpp"

#include <gtest/gtest.h>

#include "checkpoint/discovery.hpp"
#include "support/test_files.hpp"
#include "zero2fp32/error.hpp"

namespace z2f {
namespace {

TEST(MetaCodec, RoundTripsEveryFixtureFile) {
    for (const char* fixture :
         {"z2_ws2_frozen_bf16", "z3_ws2_tied_fp32", "z3_ws2_frozen_bf16", "z1_ws2_bf16opt"}) {
        CheckpointFiles files = discover_checkpoint(testing::fixture_path(fixture), "");
        auto inputs = checkpoint_inputs(files);
        std::vector<std::byte> buffer;
        std::vector<FileMeta> originals;
        for (std::size_t i = 0; i < inputs.size(); ++i) {
            originals.push_back(read_file_meta(inputs[i], static_cast<std::uint32_t>(i)));
            encode_file_meta(originals.back(), buffer);
        }
        std::size_t pos = 0;
        for (const FileMeta& original : originals) {
            FileMeta decoded = decode_file_meta(buffer, pos);
            EXPECT_EQ(decoded.size, original.size);
            EXPECT_EQ(decoded.info, original.info) << fixture;
        }
        EXPECT_EQ(pos, buffer.size());
    }
}

TEST(MetaCodec, TruncatedBuffersAreInternalErrors) {
    FileMeta meta;
    OptimStatesInfo optim;
    optim.partition_count = {4};
    optim.master.push_back(TensorRef{3, DType::kF32, {10}, 10, 64, 40});
    meta.info = optim;
    std::vector<std::byte> buffer;
    encode_file_meta(meta, buffer);
    for (std::size_t cut = 0; cut < buffer.size(); ++cut) {
        std::size_t pos = 0;
        EXPECT_THROW(decode_file_meta(std::span(buffer).first(cut), pos), Error) << cut;
    }
}

}  // namespace
}  // namespace z2f
