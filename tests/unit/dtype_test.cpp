#include "common/dtype.hpp"

#include <gtest/gtest.h>

namespace z2f {
namespace {

TEST(DType, SizesAndNames) {
    EXPECT_EQ(dtype_size(DType::kF32), 4u);
    EXPECT_EQ(dtype_size(DType::kBF16), 2u);
    EXPECT_EQ(dtype_size(DType::kI64), 8u);
    EXPECT_EQ(dtype_size(DType::kBool), 1u);
    EXPECT_EQ(safetensors_name(DType::kBF16), "BF16");
    EXPECT_EQ(safetensors_name(DType::kBool), "BOOL");
    EXPECT_EQ(torch_storage_name(DType::kF16), "HalfStorage");
}

TEST(DType, TableIsIndexedByEnumValue) {
    // Every enumerator round-trips through its safetensors name; a misordered table breaks this.
    for (int raw = 0; raw <= static_cast<int>(DType::kF8E5M2); ++raw) {
        auto dtype = static_cast<DType>(raw);
        auto back = dtype_from_safetensors_name(safetensors_name(dtype));
        ASSERT_TRUE(back.has_value()) << raw;
        EXPECT_EQ(*back, dtype) << raw;
        auto by_torch = dtype_from_torch_dtype_name(torch_dtype_name(dtype));
        ASSERT_TRUE(by_torch.has_value()) << raw;
        EXPECT_EQ(*by_torch, dtype) << raw;
    }
}

TEST(DType, SafetensorsOrderFollowsRustEnum) {
    // U64 > I64 > F64 > C64 > F32 > U32 > I32 > BF16 > F16 > U16 > I16 > ... > BOOL
    EXPECT_GT(safetensors_order(DType::kU64), safetensors_order(DType::kI64));
    EXPECT_GT(safetensors_order(DType::kI64), safetensors_order(DType::kF64));
    EXPECT_GT(safetensors_order(DType::kF64), safetensors_order(DType::kF32));
    EXPECT_GT(safetensors_order(DType::kF32), safetensors_order(DType::kI32));
    EXPECT_GT(safetensors_order(DType::kI32), safetensors_order(DType::kBF16));
    EXPECT_GT(safetensors_order(DType::kBF16), safetensors_order(DType::kF16));
    EXPECT_GT(safetensors_order(DType::kF16), safetensors_order(DType::kI16));
    EXPECT_EQ(safetensors_order(DType::kBool), 0);
}

TEST(DType, StorageNames) {
    EXPECT_EQ(dtype_from_torch_storage_name("BFloat16Storage"), DType::kBF16);
    EXPECT_EQ(dtype_from_torch_storage_name("LongStorage"), DType::kI64);
    EXPECT_FALSE(dtype_from_torch_storage_name("UntypedStorage").has_value());
    EXPECT_FALSE(dtype_from_torch_storage_name("").has_value());
}

}  // namespace
}  // namespace z2f
