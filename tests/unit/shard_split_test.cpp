#include "output/shard_split.hpp"

#include <map>

#include <gtest/gtest.h>

#include "common/dtype.hpp"
#include "common/errors.hpp"
#include "reference_files.hpp"

namespace z2f {
namespace {

using Files = std::vector<std::vector<std::uint32_t>>;

Files tensors_of(const output::ShardSplit& split) {
    Files files;
    for (const output::ShardFile& file : split.files) {
        files.push_back(file.tensors);
    }
    return files;
}

std::vector<output::ShardInput> sized(const std::vector<std::uint64_t>& bytes) {
    static const std::vector<std::string> kNames = [] {
        std::vector<std::string> names;
        for (int i = 0; i < 64; ++i) {
            std::string name = "t";  // (not "t" + ...: GCC 12 emits a bogus -Wrestrict)
            name += std::to_string(i);
            names.push_back(std::move(name));
        }
        return names;
    }();
    std::vector<output::ShardInput> inputs;
    for (std::size_t i = 0; i < bytes.size(); ++i) {
        inputs.push_back({kNames[i], bytes[i], -1});
    }
    return inputs;
}

constexpr std::uint64_t GB = 1'000'000'000;

TEST(ShardSplit, DocstringExampleIsGreedyNotBinPacked) {
    const auto inputs = sized({6 * GB, 6 * GB, 2 * GB, 6 * GB, 2 * GB, 2 * GB});
    const output::ShardSplit split =
        output::split_into_shards(inputs, 10 * GB, OutputFormat::kSafetensors);
    EXPECT_EQ(tensors_of(split), (Files{{0}, {1, 2}, {3, 4, 5}}));
    ASSERT_EQ(split.files.size(), 3u);
    EXPECT_EQ(split.files[0].name, "model-00001-of-00003.safetensors");
    EXPECT_EQ(split.files[1].name, "model-00002-of-00003.safetensors");
    EXPECT_EQ(split.files[2].name, "model-00003-of-00003.safetensors");
    EXPECT_EQ(split.files[1].bytes, 8 * GB);
    EXPECT_EQ(split.total_size, 24 * GB);
    EXPECT_EQ(split.file_of, (std::vector<std::uint32_t>{0, 1, 1, 2, 2, 2}));
    EXPECT_TRUE(split.is_sharded());
}

TEST(ShardSplit, OversizedTensorIsAppendedAtOnceAheadOfTheOpenShard) {
    // First.
    EXPECT_EQ(
        tensors_of(output::split_into_shards(sized({15, 3, 4}), 10, OutputFormat::kSafetensors)),
        (Files{{0}, {1, 2}}));
    // Middle: the big one is appended while [0] is still open, so it comes first.
    EXPECT_EQ(
        tensors_of(output::split_into_shards(sized({3, 15, 4, 5}), 10, OutputFormat::kSafetensors)),
        (Files{{1}, {0, 2}, {3}}));
    // Last.
    EXPECT_EQ(
        tensors_of(output::split_into_shards(sized({3, 4, 15}), 10, OutputFormat::kSafetensors)),
        (Files{{2}, {0, 1}}));
    // Two in a row, and exactly at the limit (not oversized: "size > max").
    EXPECT_EQ(tensors_of(output::split_into_shards(sized({2, 11, 12, 10, 1}), 10,
                                                   OutputFormat::kSafetensors)),
              (Files{{1}, {2}, {0}, {3}, {4}}));
}

TEST(ShardSplit, AliasesJoinTheirOwnersShardAndAddNoBytes) {
    std::vector<output::ShardInput> inputs = sized({4, 4, 0, 4});
    inputs[2].storage_of = 0;
    inputs[2].bytes = 999;  // ignored
    const output::ShardSplit split =
        output::split_into_shards(inputs, 8, OutputFormat::kSafetensors);
    EXPECT_EQ(tensors_of(split), (Files{{0, 1, 2}, {3}}));
    EXPECT_EQ(split.total_size, 12u);
    EXPECT_EQ(split.files[0].bytes, 8u);
    EXPECT_EQ(split.file_of[2], 0u);

    // Alias of an oversized tensor; aliases grouped by storage in order of first appearance.
    std::vector<output::ShardInput> more = sized({20, 1, 2, 0, 0, 0});
    more[3].storage_of = 1;  // alias of t1
    more[4].storage_of = 0;  // alias of t0 (the big one)
    more[5].storage_of = 1;
    const output::ShardSplit split2 = output::split_into_shards(more, 10, OutputFormat::kTorch);
    EXPECT_EQ(tensors_of(split2), (Files{{0, 4}, {1, 2, 3, 5}}));
    EXPECT_EQ(split2.file_of, (std::vector<std::uint32_t>{0, 1, 1, 1, 0, 1}));
    EXPECT_EQ(split2.files[0].name, "pytorch_model-00001-of-00002.bin");
    EXPECT_EQ(split2.total_size, 23u);

    // Within one shard, aliases come after the owners, storages in first-appearance order.
    std::vector<output::ShardInput> order = sized({1, 1, 0, 0});
    order[2].storage_of = 1;
    order[3].storage_of = 0;
    std::vector<output::ShardInput> with_tail = order;
    with_tail.push_back({"tail", 100, -1});
    EXPECT_EQ(tensors_of(output::split_into_shards(with_tail, 10, OutputFormat::kSafetensors)),
              (Files{{4}, {0, 1, 3, 2}}));
}

TEST(ShardSplit, ZeroByteTensorsAndZeroLimit) {
    EXPECT_EQ(
        tensors_of(output::split_into_shards(sized({8, 0, 1}), 8, OutputFormat::kSafetensors)),
        (Files{{0, 1}, {2}}));
    // With a 0-byte limit every non-empty tensor is oversized; empty ones share the open shard.
    EXPECT_EQ(
        tensors_of(output::split_into_shards(sized({0, 1, 0}), 0, OutputFormat::kSafetensors)),
        (Files{{1}, {0, 2}}));
    EXPECT_EQ(tensors_of(output::split_into_shards(sized({0, 0}), 0, OutputFormat::kSafetensors)),
              (Files{{0, 1}}));
}

TEST(ShardSplit, SingleShardUsesThePlainNameAndListsEveryTensorInOrder) {
    std::vector<output::ShardInput> inputs = sized({5, 6, 0, 7});
    inputs[2].storage_of = 0;
    for (const std::optional<std::uint64_t> limit :
         {std::optional<std::uint64_t>(18), std::optional<std::uint64_t>(std::nullopt)}) {
        const output::ShardSplit split =
            output::split_into_shards(inputs, limit, OutputFormat::kSafetensors);
        EXPECT_FALSE(split.is_sharded());
        ASSERT_EQ(split.files.size(), 1u);
        EXPECT_EQ(split.files[0].name, "model.safetensors");
        EXPECT_EQ(split.files[0].tensors, (std::vector<std::uint32_t>{0, 1, 2, 3}));
        EXPECT_EQ(split.files[0].bytes, 18u);
        EXPECT_EQ(split.total_size, 18u);
        EXPECT_EQ(split.file_of, (std::vector<std::uint32_t>{0, 0, 0, 0}));
    }
    EXPECT_EQ(output::split_into_shards(inputs, std::nullopt, OutputFormat::kTorch).files[0].name,
              "pytorch_model.bin");
    EXPECT_EQ(output::split_into_shards(inputs, std::nullopt, OutputFormat::kHdf5).files[0].name,
              "model.h5");
    // One oversized tensor alone is still a single unsharded file.
    EXPECT_EQ(output::split_into_shards(sized({50}), 10, OutputFormat::kSafetensors).files[0].name,
              "model.safetensors");
}

TEST(ShardSplit, EmptyStateDictGivesNoFile) {
    const output::ShardSplit split = output::split_into_shards({}, 10, OutputFormat::kSafetensors);
    EXPECT_TRUE(split.files.empty());
    EXPECT_FALSE(split.is_sharded());
    EXPECT_EQ(split.total_size, 0u);
}

TEST(ShardSplit, InvalidStorageLinksAreInternalErrors) {
    for (std::int64_t link : {std::int64_t{1}, std::int64_t{2}, std::int64_t{-2}}) {
        std::vector<output::ShardInput> inputs = sized({1, 1});
        inputs[1].storage_of = link;
        try {
            output::split_into_shards(inputs, 10, OutputFormat::kSafetensors);
            ADD_FAILURE() << link;
        } catch (const Error& e) {
            EXPECT_EQ(e.kind(), ErrorKind::kInternal);
        }
    }
    // An alias of an alias.
    std::vector<output::ShardInput> chain = sized({1, 0, 0});
    chain[1].storage_of = 0;
    chain[2].storage_of = 1;
    EXPECT_THROW(output::split_into_shards(chain, 10, OutputFormat::kSafetensors), Error);
}

TEST(ShardSplit, FileNames) {
    EXPECT_EQ(output::shard_file_name(OutputFormat::kTorch, 0, 3),
              "pytorch_model-00001-of-00003.bin");
    EXPECT_EQ(output::shard_file_name(OutputFormat::kHdf5, 11, 12), "model-00012-of-00012.h5");
    EXPECT_EQ(output::shard_file_name(OutputFormat::kSafetensors, 99999, 123456),
              "model-100000-of-123456.safetensors");
    EXPECT_EQ(output::index_file_name(OutputFormat::kSafetensors), "model.safetensors.index.json");
    EXPECT_EQ(output::index_file_name(OutputFormat::kTorch), "pytorch_model.bin.index.json");
    EXPECT_EQ(output::index_file_name(OutputFormat::kHdf5), "model.h5.index.json");
    EXPECT_EQ(output::single_file_name(OutputFormat::kSafetensors), "model.safetensors");
}

// ---- against the real zero_to_fp32.py outputs ----

// Output bytes of every tensor, read from reference safetensors files of the same model.
std::map<std::string, std::uint64_t> sizes_from(const std::vector<std::string>& files) {
    std::map<std::string, std::uint64_t> sizes;
    for (const std::string& file : files) {
        for (const auto& tensor :
             test_data::read_ref_safetensors(test_data::deepspeed_data() / file).tensors) {
            sizes[tensor.name] = tensor.end - tensor.begin;
        }
    }
    return sizes;
}

void check_against_reference(const std::vector<std::string>& state_dict_order,
                             const std::vector<std::string>& size_files,
                             std::uint64_t max_shard_size, OutputFormat format,
                             const std::string& index_file) {
    const auto sizes = sizes_from(size_files);
    std::vector<output::ShardInput> inputs;
    for (const std::string& name : state_dict_order) {
        ASSERT_EQ(sizes.count(name), 1u) << name;
        inputs.push_back({name, sizes.at(name), -1});
    }
    const output::ShardSplit split = output::split_into_shards(inputs, max_shard_size, format);
    const test_data::RefIndex ref =
        test_data::read_ref_index(test_data::deepspeed_data() / index_file);
    EXPECT_EQ(split.total_size, ref.total_size);
    std::map<std::string, std::string> weight_map;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
        weight_map[state_dict_order[i]] = split.files[split.file_of[i]].name;
    }
    EXPECT_EQ(weight_map, ref.weight_map);
}

// zero_to_fp32's state-dict order for the `mlp` model (tests/data/deepspeed/FIXTURES.md,
// docs/deepspeed-format.md §6.5): no buffers, no frozen params, trainable params in param_shapes
// (module) order.
const std::vector<std::string> kMlpOrder = {"scale",      "temp",     "fc1.weight",  "fc1.bias",
                                            "fc2.weight", "fc2.bias", "norm.weight", "norm.bias"};

TEST(ShardSplit, MatchesZeroToFp32ShardedBin) {
    // 5KB: fc1.weight and fc2.weight are oversized and jump ahead of the open shard.
    check_against_reference(kMlpOrder, {"z2_ws2_fp32/ref/safetensors/model.safetensors"}, 5'000,
                            OutputFormat::kTorch,
                            "z2_ws2_fp32/ref/sharded_bin/pytorch_model.bin.index.json");
}

TEST(ShardSplit, MatchesZeroToFp32ShardedSafetensors) {
    check_against_reference(
        kMlpOrder,
        {"z3_ws4_fp32/ref/sharded_safetensors/model-00001-of-00002.safetensors",
         "z3_ws4_fp32/ref/sharded_safetensors/model-00002-of-00002.safetensors"},
        10'000, OutputFormat::kSafetensors,
        "z3_ws4_fp32/ref/sharded_safetensors/model.safetensors.index.json");
    check_against_reference(
        kMlpOrder,
        {"z3_ws2_bf16/ref/sharded_safetensors/model-00001-of-00003.safetensors",
         "z3_ws2_bf16/ref/sharded_safetensors/model-00002-of-00003.safetensors",
         "z3_ws2_bf16/ref/sharded_safetensors/model-00003-of-00003.safetensors"},
        5'000, OutputFormat::kSafetensors,
        "z3_ws2_bf16/ref/sharded_safetensors/model.safetensors.index.json");
    // `frozen` model: buffer `scale`, then the frozen (bf16) fc1.*, then the trainable params.
    check_against_reference(
        {"scale", "fc1.weight", "fc1.bias", "temp", "fc2.weight", "fc2.bias", "norm.weight",
         "norm.bias"},
        {"z3_ws2_frozen_bf16/ref/sharded_safetensors/model-00001-of-00002.safetensors",
         "z3_ws2_frozen_bf16/ref/sharded_safetensors/model-00002-of-00002.safetensors"},
        5'000, OutputFormat::kSafetensors,
        "z3_ws2_frozen_bf16/ref/sharded_safetensors/model.safetensors.index.json");
}

}  // namespace
}  // namespace z2f
