// Element types of tensors, and their names in each format we read or write.
//
// One enum for the whole program. The safetensors sort order (docs/output-formats.md §3.4) is
// the declaration order of the Rust `Dtype` enum, which is NOT this enum's order: use
// `safetensors_order()` for sorting, never the numeric value of `DType`.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace z2f {

enum class DType : std::uint8_t {
    kF64,
    kF32,
    kF16,
    kBF16,
    kI64,
    kI32,
    kI16,
    kI8,
    kU8,
    kBool,
    kU16,
    kU32,
    kU64,
    kC64,
    kF8E4M3,
    kF8E5M2,
};
// The last enumerator, for range checks of decoded values.
inline constexpr DType kLastDType = DType::kF8E5M2;

// Bytes per element.
std::uint32_t dtype_size(DType dtype) noexcept;

bool is_floating(DType dtype) noexcept;

// "F32", "BF16", "I64", "BOOL", ... as safetensors headers spell them.
std::string_view safetensors_name(DType dtype) noexcept;
std::optional<DType> dtype_from_safetensors_name(std::string_view name) noexcept;

// Position in the Rust `Dtype` enum of safetensors (BOOL=0 ... U64=21). The reference writer
// lists tensors by this value, descending, then by name.
int safetensors_order(DType dtype) noexcept;

// "FloatStorage", "BFloat16Storage", ... (the class name under module `torch`).
std::string_view torch_storage_name(DType dtype) noexcept;
std::optional<DType> dtype_from_torch_storage_name(std::string_view name) noexcept;

// "float32", "bfloat16", "int64", ... (the attribute name under module `torch`).
std::string_view torch_dtype_name(DType dtype) noexcept;
std::optional<DType> dtype_from_torch_dtype_name(std::string_view name) noexcept;

// A short human name for messages: "fp32", "bf16", "fp16", "int64", ...
std::string_view dtype_display_name(DType dtype) noexcept;

}  // namespace z2f
