// The layout of one safetensors output file, byte-identical to what the Python `safetensors`
// package (its Rust core, `prepare()` + serde_json) writes for the same tensors.
//
// File bytes:
//   [0, 8)        N, the header length, u64 little-endian
//   [8, 8+N)      header: compact JSON (no whitespace), then 0-7 spaces so that N % 8 == 0
//   [8+N, end)    data: every tensor's bytes, row-major little-endian, packed without holes
//                 in header order; data_offsets are relative to byte 8+N
// The file is exactly 8 + N + sum(tensor bytes) long.
//
// Header JSON:
//   {"__metadata__":{"format":"pt",<extras>},"<name>":{"dtype":"F32","shape":[53,37],
//    "data_offsets":[212,8056]},...}
// - "__metadata__" first; inside it "format":"pt" first, then the extra entries (string ->
//   string, e.g. the tied alias -> owner records) sorted by key bytes. (The Rust writer keeps
//   metadata in a hash map, so with extras its order is not defined; this one is ours.)
// - tensors sorted by the safetensors Dtype enum DESCENDING (safetensors_order(): F64 before
//   F32 before BF16 before F16 ...), then by name bytes ascending; their data is laid out in
//   the same order. Field order: dtype, shape, data_offsets. A 0-dim tensor has "shape":[].
// - strings escaped like serde_json (json_escape.hpp); numbers in plain decimal.
// - N must not exceed 100,000,000 (MAX_HEADER_SIZE of every safetensors reader).
//
// Tied aliases (PlannedTensor::alias_of >= 0) are not written: safetensors cannot share
// storage, so the caller records `alias -> owner` in the extra metadata instead.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "output/output_layout.hpp"
#include "plan/tensor_plan.hpp"

namespace z2f::output {

inline constexpr std::uint64_t kSafetensorsMaxHeaderLength = 100'000'000;

// `tensors`: indices into plan.tensors of this file's tensors, in any order (aliases among them
// are skipped). `extra_metadata`: entries besides "format" (a "format" key or a duplicate key is
// an internal error). The result has one fixed region (length prefix + header, at offset 0) and
// one slot per written tensor, with ascending offsets; slot.tensor is the plan index.
// Throws an input error for names that are not UTF-8, an internal error for duplicate names,
// and a usage error when the header would exceed the reader limit.
OutputFileLayout safetensors_layout(
    const plan::TensorPlan& plan, std::span<const std::uint32_t> tensors, std::string file_name,
    std::span<const std::pair<std::string_view, std::string_view>> extra_metadata);

}  // namespace z2f::output
