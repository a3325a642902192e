// Element types of tensors: the one enum of the library, public because plans and results name
// the dtype of every tensor. Names and sizes: z2f::dtype_name(), z2f::dtype_size() below.
#pragma once

#include <cstdint>
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

// "float32", "bfloat16", "int64", ... as torch names them (the attribute under module `torch`).
std::string_view dtype_name(DType dtype) noexcept;

}  // namespace z2f
