#include "common/dtype.hpp"

#include <array>

namespace z2f {
namespace {

struct DTypeInfo {
    DType dtype;
    std::uint32_t size;
    bool floating;
    int safetensors_order;
    std::string_view safetensors;
    std::string_view storage;
    std::string_view torch_name;
    std::string_view display;
};

// safetensors order: BOOL=0, F4=1, F6_E2M3=2, F6_E3M2=3, U8=4, I8=5, F8_E5M2=6, F8_E4M3=7,
// F8_E8M0=8, F8_E4M3FNUZ=9, F8_E5M2FNUZ=10, I16=11, U16=12, F16=13, BF16=14, I32=15, U32=16,
// F32=17, C64=18, F64=19, I64=20, U64=21.
constexpr std::array<DTypeInfo, 16> kTable{{
    {DType::kF64, 8, true, 19, "F64", "DoubleStorage", "float64", "fp64"},
    {DType::kF32, 4, true, 17, "F32", "FloatStorage", "float32", "fp32"},
    {DType::kF16, 2, true, 13, "F16", "HalfStorage", "float16", "fp16"},
    {DType::kBF16, 2, true, 14, "BF16", "BFloat16Storage", "bfloat16", "bf16"},
    {DType::kI64, 8, false, 20, "I64", "LongStorage", "int64", "int64"},
    {DType::kI32, 4, false, 15, "I32", "IntStorage", "int32", "int32"},
    {DType::kI16, 2, false, 11, "I16", "ShortStorage", "int16", "int16"},
    {DType::kI8, 1, false, 5, "I8", "CharStorage", "int8", "int8"},
    {DType::kU8, 1, false, 4, "U8", "ByteStorage", "uint8", "uint8"},
    {DType::kBool, 1, false, 0, "BOOL", "BoolStorage", "bool", "bool"},
    // Dtypes without a typed storage class only come through _rebuild_tensor_v3.
    {DType::kU16, 2, false, 12, "U16", "", "uint16", "uint16"},
    {DType::kU32, 4, false, 16, "U32", "", "uint32", "uint32"},
    {DType::kU64, 8, false, 21, "U64", "", "uint64", "uint64"},
    {DType::kC64, 8, false, 18, "C64", "ComplexFloatStorage", "complex64", "complex64"},
    {DType::kF8E4M3, 1, true, 7, "F8_E4M3", "", "float8_e4m3fn", "fp8_e4m3"},
    {DType::kF8E5M2, 1, true, 6, "F8_E5M2", "", "float8_e5m2", "fp8_e5m2"},
}};

const DTypeInfo& info(DType dtype) noexcept {
    return kTable[static_cast<std::size_t>(dtype)];  // kTable is indexed by enum value
}

}  // namespace

std::uint32_t dtype_size(DType dtype) noexcept {
    return info(dtype).size;
}
bool is_floating(DType dtype) noexcept {
    return info(dtype).floating;
}
std::string_view safetensors_name(DType dtype) noexcept {
    return info(dtype).safetensors;
}
int safetensors_order(DType dtype) noexcept {
    return info(dtype).safetensors_order;
}
std::string_view torch_storage_name(DType dtype) noexcept {
    return info(dtype).storage;
}
std::string_view torch_dtype_name(DType dtype) noexcept {
    return info(dtype).torch_name;
}
std::string_view dtype_display_name(DType dtype) noexcept {
    return info(dtype).display;
}

std::optional<DType> dtype_from_safetensors_name(std::string_view name) noexcept {
    for (const auto& entry : kTable) {
        if (entry.safetensors == name) {
            return entry.dtype;
        }
    }
    return std::nullopt;
}

std::optional<DType> dtype_from_torch_storage_name(std::string_view name) noexcept {
    for (const auto& entry : kTable) {
        if (!entry.storage.empty() && entry.storage == name) {
            return entry.dtype;
        }
    }
    return std::nullopt;
}

std::string_view dtype_name(DType dtype) noexcept {
    return torch_dtype_name(dtype);
}

std::optional<DType> dtype_from_torch_dtype_name(std::string_view name) noexcept {
    // torch also exposes aliases for the common types.
    if (name == "float" || name == "float32")
        return DType::kF32;
    if (name == "double")
        return DType::kF64;
    if (name == "half")
        return DType::kF16;
    if (name == "long")
        return DType::kI64;
    if (name == "int")
        return DType::kI32;
    if (name == "short")
        return DType::kI16;
    for (const auto& entry : kTable) {
        if (entry.torch_name == name) {
            return entry.dtype;
        }
    }
    return std::nullopt;
}

}  // namespace z2f
