#include "output/safetensors_layout.hpp"

#include <algorithm>
#include <map>

#include <gtest/gtest.h>

#include "common/bytes.hpp"
#include "common/errors.hpp"
#include "reference_files.hpp"

namespace z2f {
namespace {

plan::PlannedTensor tensor(std::string name, DType dtype, std::vector<std::uint64_t> shape,
                           std::int64_t alias_of = -1) {
    plan::PlannedTensor t;
    t.name = std::move(name);
    t.shape = std::move(shape);
    t.source_dtype = DType::kF32;
    t.output_dtype = dtype;
    t.alias_of = alias_of;
    t.role = alias_of >= 0 ? TensorRole::kAlias : TensorRole::kTrainable;
    return t;
}

std::vector<std::uint32_t> all_of(const plan::TensorPlan& plan) {
    std::vector<std::uint32_t> indices(plan.tensors.size());
    for (std::size_t i = 0; i < indices.size(); ++i) {
        indices[i] = static_cast<std::uint32_t>(i);
    }
    return indices;
}

std::string header_text(const output::OutputFileLayout& layout) {
    const std::vector<std::byte>& bytes = layout.fixed.at(0).bytes;
    return {reinterpret_cast<const char*>(bytes.data()) + 8, bytes.size() - 8};
}

// Slots ascending and disjoint; fixed region + slots cover [0, size) exactly.
void expect_covering(const output::OutputFileLayout& layout) {
    ASSERT_EQ(layout.fixed.size(), 1u);
    EXPECT_EQ(layout.fixed[0].offset, 0u);
    std::uint64_t position = layout.fixed[0].bytes.size();
    for (const output::TensorSlot& slot : layout.slots) {
        EXPECT_EQ(slot.offset, position);
        position = slot.offset + slot.length;
    }
    EXPECT_EQ(position, layout.size);
    EXPECT_EQ(layout.fixed[0].bytes.size() % 8, 0u);
    EXPECT_EQ(load_le<std::uint64_t>(layout.fixed[0].bytes.data()) + 8,
              layout.fixed[0].bytes.size());
}

TEST(SafetensorsLayout, ByteIdenticalHeadersForEveryReferenceFile) {
    const auto files = test_data::all_ref_safetensors();
    ASSERT_GE(files.size(), 12u);
    for (const auto& path : files) {
        SCOPED_TRACE(path.string());
        const test_data::RefSafetensors ref = test_data::read_ref_safetensors(path);
        // Plan the file's tensors in reverse header order: the layout must sort them itself.
        plan::TensorPlan plan;
        for (auto it = ref.tensors.rbegin(); it != ref.tensors.rend(); ++it) {
            plan.tensors.push_back(
                tensor(it->name, *dtype_from_safetensors_name(it->dtype), it->shape));
        }
        const output::OutputFileLayout layout =
            output::safetensors_layout(plan, all_of(plan), path.filename().string(), {});
        EXPECT_EQ(layout.name, path.filename().string());
        EXPECT_EQ(layout.format, OutputFormat::kSafetensors);
        EXPECT_EQ(layout.fixed.at(0).bytes, ref.head);
        EXPECT_EQ(layout.size, ref.file_size);
        ASSERT_EQ(layout.slots.size(), ref.tensors.size());
        for (std::size_t i = 0; i < ref.tensors.size(); ++i) {
            const output::TensorSlot& slot = layout.slots[i];
            EXPECT_EQ(plan.tensors[slot.tensor].name, ref.tensors[i].name);
            EXPECT_EQ(slot.offset, 8 + ref.header_length + ref.tensors[i].begin);
            EXPECT_EQ(slot.length, ref.tensors[i].end - ref.tensors[i].begin);
        }
        expect_covering(layout);
    }
}

TEST(SafetensorsLayout, SortsByDtypeEnumDescendingThenName) {
    plan::TensorPlan plan;
    plan.tensors = {
        tensor("b", DType::kBool, {3}),  tensor("u", DType::kU8, {2}),
        tensor("h", DType::kF16, {2}),   tensor("bf", DType::kBF16, {1, 2}),
        tensor("i32", DType::kI32, {1}), tensor("f", DType::kF32, {}),
        tensor("d", DType::kF64, {1}),   tensor("i64", DType::kI64, {2}),
        tensor("a", DType::kF32, {2}),   tensor("i8", DType::kI8, {0}),
    };
    const output::OutputFileLayout layout =
        output::safetensors_layout(plan, all_of(plan), "m.safetensors", {});
    // 588 bytes of JSON + 4 spaces.
    EXPECT_EQ(header_text(layout), R"({"__metadata__":{"format":"pt"},)"
                                   R"("i64":{"dtype":"I64","shape":[2],"data_offsets":[0,16]},)"
                                   R"("d":{"dtype":"F64","shape":[1],"data_offsets":[16,24]},)"
                                   R"("a":{"dtype":"F32","shape":[2],"data_offsets":[24,32]},)"
                                   R"("f":{"dtype":"F32","shape":[],"data_offsets":[32,36]},)"
                                   R"("i32":{"dtype":"I32","shape":[1],"data_offsets":[36,40]},)"
                                   R"("bf":{"dtype":"BF16","shape":[1,2],"data_offsets":[40,44]},)"
                                   R"("h":{"dtype":"F16","shape":[2],"data_offsets":[44,48]},)"
                                   R"("i8":{"dtype":"I8","shape":[0],"data_offsets":[48,48]},)"
                                   R"("u":{"dtype":"U8","shape":[2],"data_offsets":[48,50]},)"
                                   R"("b":{"dtype":"BOOL","shape":[3],"data_offsets":[50,53]}})"
                                   "    ");
    EXPECT_EQ(layout.size, 8u + 592u + 53u);
    std::vector<std::string> order;
    for (const output::TensorSlot& slot : layout.slots) {
        order.push_back(plan.tensors[slot.tensor].name);
    }
    EXPECT_EQ(order,
              (std::vector<std::string>{"i64", "d", "a", "f", "i32", "bf", "h", "i8", "u", "b"}));
    expect_covering(layout);
}

TEST(SafetensorsLayout, NameBytesOrderEscapingAndSortedExtraMetadata) {
    plan::TensorPlan plan;
    plan.tensors = {
        tensor("\xc3\xa9", DType::kF32, {1}),  // é
        tensor("a.b", DType::kF32, {1}),      tensor("a", DType::kF32, {1}),
        tensor("a\"q", DType::kF32, {1}),     tensor("B", DType::kF32, {1}),
    };
    const std::pair<std::string_view, std::string_view> extras[] = {
        {"lm_head.weight", "embed.weight"},
        {"a\n", "\xc3\xa9"},
    };
    const output::OutputFileLayout layout =
        output::safetensors_layout(plan, all_of(plan), "x", extras);
    // 351 bytes of JSON + 1 space; non-ASCII stays raw UTF-8 as serde_json writes it.
    EXPECT_EQ(header_text(layout),
              "{\"__metadata__\":{\"format\":\"pt\",\"a\\n\":\"\xc3\xa9\","
              "\"lm_head.weight\":\"embed.weight\"},"
              "\"B\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
              "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]},"
              "\"a\\\"q\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]},"
              "\"a.b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[12,16]},"
              "\"\xc3\xa9\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[16,20]}} ");
    expect_covering(layout);
}

TEST(SafetensorsLayout, AliasesAreSkippedAndOnlyTheShardsTensorsWritten) {
    plan::TensorPlan plan;
    plan.tensors = {
        tensor("embed.weight", DType::kF32, {4, 2}),
        tensor("other", DType::kF32, {3}),
        tensor("proj.weight", DType::kBF16, {2, 2}),
        tensor("lm_head.weight", DType::kF32, {4, 2}, /*alias_of=*/0),
    };
    const std::vector<std::uint32_t> shard{3, 2, 0};
    const std::pair<std::string_view, std::string_view> extras[] = {
        {"lm_head.weight", "embed.weight"}};
    const output::OutputFileLayout layout =
        output::safetensors_layout(plan, shard, "model.safetensors", extras);
    ASSERT_EQ(layout.slots.size(), 2u);
    EXPECT_EQ(layout.slots[0].tensor, 0u);  // F32 before BF16
    EXPECT_EQ(layout.slots[0].length, 32u);
    EXPECT_EQ(layout.slots[1].tensor, 2u);
    EXPECT_EQ(layout.slots[1].length, 8u);
    EXPECT_EQ(header_text(layout).find("\"other\""), std::string::npos);
    EXPECT_EQ(header_text(layout).rfind(R"({"__metadata__":{"format":"pt","lm_head.weight":)"
                                        R"("embed.weight"},"embed.weight":)",
                                        0),
              0u);
    expect_covering(layout);
}

TEST(SafetensorsLayout, EmptyFile) {
    const plan::TensorPlan plan;
    const output::OutputFileLayout layout =
        output::safetensors_layout(plan, {}, "empty.safetensors", {});
    EXPECT_EQ(header_text(layout), R"({"__metadata__":{"format":"pt"}})");  // 32 bytes, no pad
    EXPECT_EQ(layout.size, 40u);
    EXPECT_TRUE(layout.slots.empty());
}

TEST(SafetensorsLayout, Errors) {
    plan::TensorPlan plan;
    plan.tensors = {tensor("a", DType::kF32, {1}), tensor("a", DType::kF32, {2}),
                    tensor("bad\xff", DType::kF32, {1})};
    auto kind_of = [](auto&& call) {
        try {
            call();
        } catch (const Error& e) {
            return e.kind();
        }
        return ErrorKind::kInterrupted;  // "no error"
    };
    const std::vector<std::uint32_t> dup{0, 1};
    const std::vector<std::uint32_t> bad{2};
    const std::vector<std::uint32_t> out_of_range{7};
    const std::vector<std::uint32_t> first{0};
    const std::pair<std::string_view, std::string_view> format[] = {{"format", "np"}};
    const std::pair<std::string_view, std::string_view> twice[] = {{"k", "1"}, {"k", "2"}};
    EXPECT_EQ(kind_of([&] { output::safetensors_layout(plan, dup, "f", {}); }),
              ErrorKind::kInternal);
    EXPECT_EQ(kind_of([&] { output::safetensors_layout(plan, bad, "f", {}); }), ErrorKind::kInput);
    EXPECT_EQ(kind_of([&] { output::safetensors_layout(plan, out_of_range, "f", {}); }),
              ErrorKind::kInternal);
    EXPECT_EQ(kind_of([&] { output::safetensors_layout(plan, first, "f", format); }),
              ErrorKind::kInternal);
    EXPECT_EQ(kind_of([&] { output::safetensors_layout(plan, first, "f", twice); }),
              ErrorKind::kInternal);
}

TEST(SafetensorsLayout, HeaderOverTheReaderLimitIsRefused) {
    plan::TensorPlan plan;
    plan.tensors = {
        tensor(std::string(output::kSafetensorsMaxHeaderLength, 'n'), DType::kF32, {1})};
    try {
        output::safetensors_layout(plan, all_of(plan), "huge.safetensors", {});
        FAIL();
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kUsage);
        EXPECT_NE(std::string(e.what()).find("--max_shard_size"), std::string::npos);
    }
}

}  // namespace
}  // namespace z2f
