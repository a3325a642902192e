// A strict reader of safetensors headers, for zero2fp32-inspect, the tests (which read outputs
// back through it) and a fuzz target. The conversion itself never parses headers back: --verify
// compares every output byte with the bytes the plan's layout gives, and --resume compares a
// file's size and the CRC-32 of its header with the plan and the run manifest.
//
// File bytes (see safetensors_layout.hpp for the writer side):
//   [0, 8)      N, u64 little-endian
//   [8, 8+N)    UTF-8 JSON object, optionally right-padded with whitespace
//   [8+N, end)  data buffer; data_offsets [begin, end) are relative to byte 8+N
//
// Every rule the Rust `safetensors` reader enforces (read_metadata / Metadata::validate),
// plus a few it leaves loose, each violation being an input error that names the file:
// - the file holds at least 8 bytes; N <= 100,000,000; 8 + N <= file size;
// - the header starts with '{' and is one valid JSON object (strings valid UTF-8, nothing but
//   whitespace after it);
// - "__metadata__", when present, is an object of string values;
// - every other key is a tensor name, given once (the Rust reader would silently keep the last
//   of duplicates); its value is an object with exactly the fields "dtype" (a known name:
//   F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL U16 U32 U64 C64 F8_E4M3 F8_E5M2), "shape" (an array
//   of unsigned integers) and "data_offsets" (an array of two unsigned integers); unknown or
//   repeated fields are rejected (the Rust reader ignores unknown ones);
// - prod(shape) * dtype size, computed with overflow checks, equals end - begin;
// - sorted by offsets, the tensors tile the data buffer: the first begins at 0, each begins
//   where the previous ends, none ends before it begins;
// - 8 + N + (end of the last tensor, 0 when there is none) equals the file size.
// The JSON is read with nlohmann's SAX interface into these structs directly, never into a DOM,
// and nesting deeper than the format allows stops the parse at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/dtype.hpp"

namespace z2f::output {

struct SafetensorsTensorInfo {
    std::string name;
    DType dtype = DType::kF32;
    std::vector<std::uint64_t> shape;
    std::uint64_t begin = 0;  // data_offsets, relative to the data buffer
    std::uint64_t end = 0;
};

struct SafetensorsHeader {
    std::uint64_t header_length = 0;  // N
    std::uint64_t data_offset = 0;    // 8 + N: where the data buffer starts in the file
    bool has_metadata = false;
    std::vector<std::pair<std::string, std::string>> metadata;  // in file order
    std::vector<SafetensorsTensorInfo> tensors;                 // by ascending data offsets
};

// Reads N from the first 8 bytes of the file and checks it against the limit and the file size;
// the caller then reads bytes [0, 8 + N) and passes them to parse_safetensors_header.
std::uint64_t safetensors_header_length(std::span<const std::byte> first_bytes,
                                        std::uint64_t file_size, std::string_view file);

// `head`: the first 8 + N bytes of the file (length prefix included).
SafetensorsHeader parse_safetensors_header(std::span<const std::byte> head, std::uint64_t file_size,
                                           std::string_view file);

}  // namespace z2f::output
