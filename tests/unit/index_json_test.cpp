#include "output/index_json.hpp"

#include <gtest/gtest.h>

#include "common/errors.hpp"
#include "output/shard_split.hpp"
#include "reference_files.hpp"

namespace z2f {
namespace {

// Expected bytes: Python 3.11
//   json.dumps({"metadata": {...}, "weight_map": {...}}, indent=2, sort_keys=True) + "\n"
TEST(IndexJson, MatchesPythonJsonDumpsWithEscapesAndExtras) {
    const output::StringPairView extras[] = {
        {"lm_head.weight", "embed.weight"},
        {"format", "pt"},
        {"\xc3\xbc"
         "ber",
         "x\xc3\xa9"},  // "über": "xé"
    };
    const output::StringPairView weights[] = {
        {"\xc3\xa9", "a"},  // é
        {"b\n", "x"},
        {"Z", "y"},
        {"\xf0\x9f\x98\x80", "m"},  // U+1F600 sorts after U+FFFF
        {"\xef\xbf\xbf", "n"},      // U+FFFF
        {"a\"q", "model-00001-of-00002.safetensors"},
    };
    const std::string expected =
        "{\n  \"metadata\": {\n    \"format\": \"pt\",\n    \"lm_head.weight\": "
        "\"embed.weight\",\n    \"total_size\": 10,\n    \"\\u00fcber\": \"x\\u00e9\"\n  },\n  "
        "\"weight_map\": {\n    \"Z\": \"y\",\n    \"a\\\"q\": "
        "\"model-00001-of-00002.safetensors\",\n    \"b\\n\": \"x\",\n    \"\\u00e9\": \"a\",\n  "
        "  \"\\uffff\": \"n\",\n    \"\\ud83d\\ude00\": \"m\"\n  }\n}\n";
    EXPECT_EQ(output::index_json(10, extras, weights), expected);
}

TEST(IndexJson, EmptyWeightMapIsWrittenAsEmptyObject) {
    EXPECT_EQ(output::index_json(0, {}, {}),
              "{\n  \"metadata\": {\n    \"total_size\": 0\n  },\n  \"weight_map\": {}\n}\n");
}

TEST(IndexJson, DuplicatesAreInternalErrorsAndBadUtf8IsInputError) {
    const output::StringPairView twice[] = {{"a", "x"}, {"a", "y"}};
    const output::StringPairView total[] = {{"total_size", "1"}};
    const output::StringPairView bad_name[] = {{"a\xff", "x"}};
    auto kind_of = [](auto&& call) {
        try {
            call();
        } catch (const Error& e) {
            return e.kind();
        }
        return ErrorKind::kInterrupted;  // "no error"
    };
    EXPECT_EQ(kind_of([&] { output::index_json(1, {}, twice); }), ErrorKind::kInternal);
    EXPECT_EQ(kind_of([&] { output::index_json(1, total, {}); }), ErrorKind::kInternal);
    EXPECT_EQ(kind_of([&] { output::index_json(1, twice, {}); }), ErrorKind::kInternal);
    EXPECT_EQ(kind_of([&] { output::index_json(1, {}, bad_name); }), ErrorKind::kInput);
}

// The whole chain (split, then index) against the index files zero_to_fp32.py wrote.
struct ReferenceCase {
    std::vector<std::string> order;       // zero_to_fp32 state-dict order
    std::vector<std::string> size_files;  // reference safetensors holding every tensor
    std::uint64_t max_shard_size;
    OutputFormat format;
    std::string index_file;
};

TEST(IndexJson, ByteIdenticalToZeroToFp32IndexFiles) {
    const std::vector<std::string> mlp = {"scale",      "temp",     "fc1.weight",  "fc1.bias",
                                          "fc2.weight", "fc2.bias", "norm.weight", "norm.bias"};
    const std::string z3ws4 = "z3_ws4_fp32/ref/sharded_safetensors/";
    const std::string z3bf16 = "z3_ws2_bf16/ref/sharded_safetensors/";
    const std::string z3frozen = "z3_ws2_frozen_bf16/ref/sharded_safetensors/";
    const ReferenceCase cases[] = {
        {mlp,
         {"z2_ws2_fp32/ref/safetensors/model.safetensors"},
         5'000,
         OutputFormat::kTorch,
         "z2_ws2_fp32/ref/sharded_bin/pytorch_model.bin.index.json"},
        {mlp,
         {z3ws4 + "model-00001-of-00002.safetensors", z3ws4 + "model-00002-of-00002.safetensors"},
         10'000,
         OutputFormat::kSafetensors,
         z3ws4 + "model.safetensors.index.json"},
        {mlp,
         {z3bf16 + "model-00001-of-00003.safetensors", z3bf16 + "model-00002-of-00003.safetensors",
          z3bf16 + "model-00003-of-00003.safetensors"},
         5'000,
         OutputFormat::kSafetensors,
         z3bf16 + "model.safetensors.index.json"},
        {{"scale", "fc1.weight", "fc1.bias", "temp", "fc2.weight", "fc2.bias", "norm.weight",
          "norm.bias"},
         {z3frozen + "model-00001-of-00002.safetensors",
          z3frozen + "model-00002-of-00002.safetensors"},
         5'000,
         OutputFormat::kSafetensors,
         z3frozen + "model.safetensors.index.json"},
    };
    for (const ReferenceCase& c : cases) {
        std::map<std::string, std::uint64_t> sizes;
        for (const std::string& file : c.size_files) {
            for (const auto& t :
                 test_data::read_ref_safetensors(test_data::deepspeed_data() / file).tensors) {
                sizes[t.name] = t.end - t.begin;
            }
        }
        std::vector<output::ShardInput> inputs;
        for (const std::string& name : c.order) {
            inputs.push_back({name, sizes.at(name), -1});
        }
        const output::ShardSplit split =
            output::split_into_shards(inputs, c.max_shard_size, c.format);
        ASSERT_TRUE(split.is_sharded());
        std::vector<output::StringPairView> weight_map;
        for (std::size_t i = 0; i < inputs.size(); ++i) {
            weight_map.emplace_back(c.order[i], split.files[split.file_of[i]].name);
        }
        EXPECT_EQ(output::index_json(split.total_size, {}, weight_map),
                  test_data::read_text(test_data::deepspeed_data() / c.index_file))
            << c.index_file;
    }
}

}  // namespace
}  // namespace z2f
