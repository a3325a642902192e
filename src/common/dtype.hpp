// Element types of tensors (the public enum, zero2fp32/dtype.hpp) and their names in each
// format we read or write.
//
// The safetensors sort order (docs/output-formats.md §3.4) is the declaration order of the Rust
// `Dtype` enum, which is NOT this enum's order: use `safetensors_order()` for sorting, never the
// numeric value of `DType`.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "zero2fp32/dtype.hpp"

namespace z2f {

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
