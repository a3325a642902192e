#include "output/safetensors_reader.hpp"

#include <cstring>

#include <gtest/gtest.h>

#include "common/bytes.hpp"
#include "common/errors.hpp"
#include "output/safetensors_layout.hpp"
#include "reference_files.hpp"

namespace z2f {
namespace {

// A file: u64 N, the header text, then `data_size` zero bytes.
std::vector<std::byte> make_file(std::string_view header, std::uint64_t data_size) {
    ByteWriter writer;
    writer.put<std::uint64_t>(header.size());
    writer.put_text(header);
    writer.put_repeated(std::byte{0}, static_cast<std::size_t>(data_size));
    return writer.take();
}

output::SafetensorsHeader parse(const std::vector<std::byte>& file) {
    return output::parse_safetensors_header(file, file.size(), "t.safetensors");
}

TEST(SafetensorsReader, ReadsEveryReferenceFile) {
    for (const auto& path : test_data::all_ref_safetensors()) {
        SCOPED_TRACE(path.string());
        const std::vector<std::byte> bytes = test_data::read_file(path);
        const test_data::RefSafetensors ref = test_data::read_ref_safetensors(path);
        EXPECT_EQ(output::safetensors_header_length(bytes, bytes.size(), path.string()),
                  ref.header_length);
        const output::SafetensorsHeader header =
            output::parse_safetensors_header(ref.head, bytes.size(), path.string());
        EXPECT_EQ(header.header_length, ref.header_length);
        EXPECT_EQ(header.data_offset, 8 + ref.header_length);
        EXPECT_TRUE(header.has_metadata);
        EXPECT_EQ(header.metadata,
                  (std::vector<std::pair<std::string, std::string>>{{"format", "pt"}}));
        ASSERT_EQ(header.tensors.size(), ref.tensors.size());
        for (std::size_t i = 0; i < ref.tensors.size(); ++i) {
            EXPECT_EQ(header.tensors[i].name, ref.tensors[i].name);
            EXPECT_EQ(safetensors_name(header.tensors[i].dtype), ref.tensors[i].dtype);
            EXPECT_EQ(header.tensors[i].shape, ref.tensors[i].shape);
            EXPECT_EQ(header.tensors[i].begin, ref.tensors[i].begin);
            EXPECT_EQ(header.tensors[i].end, ref.tensors[i].end);
        }
    }
}

TEST(SafetensorsReader, RoundTripsOurLayout) {
    plan::TensorPlan plan;
    for (DType dtype : {DType::kBool, DType::kF16, DType::kF64, DType::kI64, DType::kU8,
                        DType::kBF16, DType::kF32, DType::kC64, DType::kF8E4M3}) {
        plan::PlannedTensor t;
        t.name = "t." + std::string(safetensors_name(dtype)) + "\n\xc3\xa9";
        t.shape = {3, 1, 2};
        t.output_dtype = dtype;
        plan.tensors.push_back(t);
    }
    plan.tensors[2].shape = {};
    plan.tensors[4].shape = {0, 5};
    std::vector<std::uint32_t> all(plan.tensors.size());
    for (std::uint32_t i = 0; i < all.size(); ++i) {
        all[i] = i;
    }
    const std::pair<std::string_view, std::string_view> extras[] = {{"k\"", "v\\"}};
    const output::OutputFileLayout layout =
        output::safetensors_layout(plan, all, "r.safetensors", extras);
    const output::SafetensorsHeader header =
        output::parse_safetensors_header(layout.fixed[0].bytes, layout.size, layout.name);
    EXPECT_EQ(header.metadata,
              (std::vector<std::pair<std::string, std::string>>{{"format", "pt"}, {"k\"", "v\\"}}));
    ASSERT_EQ(header.tensors.size(), layout.slots.size());
    for (std::size_t i = 0; i < layout.slots.size(); ++i) {
        const plan::PlannedTensor& planned = plan.tensors[layout.slots[i].tensor];
        EXPECT_EQ(header.tensors[i].name, planned.name);
        EXPECT_EQ(header.tensors[i].dtype, planned.output_dtype);
        EXPECT_EQ(header.tensors[i].shape, planned.shape);
        EXPECT_EQ(header.data_offset + header.tensors[i].begin, layout.slots[i].offset);
        EXPECT_EQ(header.tensors[i].end - header.tensors[i].begin, layout.slots[i].length);
    }
}

TEST(SafetensorsReader, AcceptsValidCornerCases) {
    // No tensors, no metadata.
    output::SafetensorsHeader empty = parse(make_file("{}", 0));
    EXPECT_FALSE(empty.has_metadata);
    EXPECT_TRUE(empty.tensors.empty());
    // Whitespace padding (spaces, or any JSON whitespace), any key order, a 0-dim tensor, an
    // empty tensor, an empty name, and tensors listed out of offset order.
    const output::SafetensorsHeader h =
        parse(make_file(R"({"b":{"data_offsets":[4,12],"shape":[2],"dtype":"F32"},)"
                        R"("":{"dtype":"I8","shape":[0,3],"data_offsets":[12,12]},)"
                        R"("__metadata__":{},"a":{"dtype":"F32","shape":[],"data_offsets":[0,4]}} )"
                        "\n\t\r  ",
                        12));
    ASSERT_EQ(h.tensors.size(), 3u);
    EXPECT_EQ(h.tensors[0].name, "a");
    EXPECT_EQ(h.tensors[1].name, "b");
    EXPECT_EQ(h.tensors[2].name, "");
    EXPECT_TRUE(h.has_metadata);
    EXPECT_TRUE(h.metadata.empty());
    // Escapes in names are decoded.
    const output::SafetensorsHeader e =
        parse(make_file(R"({"a\u00e9\n":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", 1));
    EXPECT_EQ(e.tensors.at(0).name, "a\xc3\xa9\n");
}

struct Malformed {
    const char* what;
    std::string header;
    std::uint64_t data_size;
    const char* message;  // a part of the expected error message
};

TEST(SafetensorsReader, RejectsMalformedHeaders) {
    const std::string f32_1 = R"({"dtype":"F32","shape":[1],"data_offsets":[0,4]})";
    const Malformed cases[] = {
        {"empty header", "", 0, "does not start with '{'"},
        {"leading space", " {}", 0, "does not start with '{'"},
        {"array", "[]", 0, "does not start with '{'"},
        {"truncated JSON", "{", 0, "not valid JSON"},
        {"trailing garbage", "{}x", 0, "not valid JSON"},
        {"trailing NUL padding", std::string("{}\0\0", 4), 0, "a NUL byte at header offset 2"},
        {"NUL then garbage", std::string("{}\0x", 4), 0, "a NUL byte"},
        {"NUL in a name", std::string("{\"a\0\":{}}", 9), 0, "a NUL byte"},
        {"comment", "{/**/}", 0, "not valid JSON"},
        {"tensor not an object", R"({"a":1})", 0, "must be an object"},
        {"tensor is null", R"({"a":null})", 0, "must be an object"},
        {"missing data_offsets", R"({"a":{"dtype":"F32","shape":[1]}})", 4, "needs the fields"},
        {"missing dtype", R"({"a":{"shape":[1],"data_offsets":[0,4]}})", 4, "needs the fields"},
        {"unknown dtype", R"({"a":{"dtype":"F31","shape":[1],"data_offsets":[0,4]}})", 4,
         "unknown dtype \"F31\""},
        {"dtype not a string", R"({"a":{"dtype":1,"shape":[1],"data_offsets":[0,4]}})", 4,
         "field \"dtype\" has the wrong type"},
        {"negative dim", R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4,
         "shape must hold unsigned integers"},
        {"fractional dim", R"({"a":{"dtype":"F32","shape":[1.0],"data_offsets":[0,4]}})", 4,
         "shape must hold unsigned integers"},
        {"dim above 2^64",
         R"({"a":{"dtype":"F32","shape":[18446744073709551616],)"
         R"("data_offsets":[0,4]}})",
         4, "shape must hold unsigned integers"},
        {"nested shape", R"({"a":{"dtype":"F32","shape":[[1]],"data_offsets":[0,4]}})", 4,
         "shape must hold unsigned integers"},
        {"shape not an array", R"({"a":{"dtype":"F32","shape":1,"data_offsets":[0,4]}})", 4,
         "field \"shape\" has the wrong type"},
        {"three offsets", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4,4]}})", 4,
         "more than two"},
        {"one offset", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", 4, "exactly two"},
        {"unknown field", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1}})", 4,
         "unknown field \"x\""},
        {"repeated field",
         R"({"a":{"dtype":"F32","dtype":"F32","shape":[1],)"
         R"("data_offsets":[0,4]}})",
         4, "field \"dtype\" appears twice"},
        {"duplicate tensor", R"({"a":)" + f32_1 + R"(,"a":)" + f32_1 + "}", 4,
         "tensor \"a\" appears twice"},
        {"metadata value not a string", R"({"__metadata__":{"format":1}})", 0, "must be a string"},
        {"metadata value an object", R"({"__metadata__":{"format":{"a":"b"}}})", 0,
         "must be a string"},
        {"deeply nested metadata", R"({"__metadata__":{"k":[[[[[[[[[[]]]]]]]]]]}})", 0,
         "must be a string"},
        {"metadata key twice", R"({"__metadata__":{"k":"1","k":"2"}})", 0,
         "metadata key \"k\" appears twice"},
        {"metadata twice", R"({"__metadata__":{},"__metadata__":{}})", 0,
         "\"__metadata__\" appears twice"},
        {"metadata not an object", R"({"__metadata__":"pt"})", 0, "must be an object of strings"},
        {"hole at the start", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8,
         "expected them to start at 0"},
        {"overlap",
         R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
         R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
         12, "expected them to start at 8"},
        {"hole between",
         R"({"a":)" + f32_1 + R"(,"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})", 12,
         "expected them to start at 4"},
        {"end before begin",
         R"({"a":)" + f32_1 + R"(,"b":{"dtype":"U8","shape":[0],"data_offsets":[4,0]}})", 4,
         "data_offsets [4, 0]"},
        {"size mismatch", R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", 4,
         "needs 8 bytes"},
        {"element count overflow",
         R"({"a":{"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,4]}})", 4,
         "overflows"},
        {"byte count overflow",
         R"({"a":{"dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,4]}})", 4,
         "overflows"},
        {"data longer than the tensors", R"({"a":)" + f32_1 + "}", 5, "data buffer holds 5"},
        {"data shorter than the tensors", R"({"a":)" + f32_1 + "}", 3, "data buffer holds 3"},
        {"invalid UTF-8 in a name", "{\"a\xff\":" + f32_1 + "}", 4, "not valid JSON"},
        {"lone surrogate escape", R"({"\ud800":)" + f32_1 + "}", 4, "not valid JSON"},
        {"true as a value", R"({"a":true})", 0, "must be an object"},
    };
    for (const Malformed& c : cases) {
        SCOPED_TRACE(c.what);
        const std::vector<std::byte> file = make_file(c.header, c.data_size);
        try {
            parse(file);
            ADD_FAILURE() << "accepted";
        } catch (const Error& e) {
            EXPECT_EQ(e.kind(), ErrorKind::kInput);
            const std::string message = e.what();
            EXPECT_NE(message.find(c.message), std::string::npos) << message;
            EXPECT_EQ(message.rfind("t.safetensors: invalid safetensors file: ", 0), 0u) << message;
        }
    }
}

TEST(SafetensorsReader, RejectsBadLengthPrefix) {
    auto message_of = [](std::span<const std::byte> bytes, std::uint64_t file_size) {
        try {
            output::safetensors_header_length(bytes, file_size, "t.safetensors");
        } catch (const Error& e) {
            EXPECT_EQ(e.kind(), ErrorKind::kInput);
            return std::string(e.what());
        }
        return std::string("accepted");
    };
    std::vector<std::byte> prefix(8);
    EXPECT_NE(message_of(std::span(prefix).first(7), 7).find("shorter than the 8-byte"),
              std::string::npos);
    store_le<std::uint64_t>(prefix.data(), 100'000'001);
    EXPECT_NE(message_of(prefix, 1'000'000'000).find("exceeds the limit"), std::string::npos);
    store_le<std::uint64_t>(prefix.data(), ~std::uint64_t{0});
    EXPECT_NE(message_of(prefix, 1'000'000'000).find("exceeds the limit"), std::string::npos);
    store_le<std::uint64_t>(prefix.data(), 100);
    EXPECT_NE(message_of(prefix, 107).find("runs past the end"), std::string::npos);
    EXPECT_EQ(message_of(prefix, 108), "accepted");
    store_le<std::uint64_t>(prefix.data(), 100'000'000);
    EXPECT_EQ(message_of(prefix, 100'000'008), "accepted");
}

}  // namespace
}  // namespace z2f
