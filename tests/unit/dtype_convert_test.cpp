// Golden bit patterns in this file come from torch 1.13.1 (Debian build, CPU capability AVX2),
// produced once with a script along these lines and pasted here; the test itself needs no Python:
//
//   x = torch.tensor(bits, dtype=torch.int64).to(torch.int32).view(torch.float32)
//   x.to(torch.bfloat16).view(torch.int16), x.to(torch.float16).view(torch.int16)
//   torch.tensor(doubles, dtype=torch.float64).to(...), torch.tensor(ints).to(...)
//   CRC: zlib.crc32(tensor.numpy().tobytes()) over the outputs described at each test.
//
// torch writes 0xFFFF for every bf16 NaN on its vectorized path; our canonical NaN is
// sign|0x7FC0, so NaN rows are checked by class plus our documented bits.
//
// In addition, during development every one of the 2^32 fp32 inputs was converted by both this
// code and torch (chunks of 2^26, CRC-32 per chunk, NaN outputs replaced by the canonical NaN
// on the torch side): all 64 chunks matched for bf16 and fp16.
#include "io/dtype_convert.hpp"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include <gtest/gtest.h>
#include <zlib.h>

#include "common/errors.hpp"

namespace z2f::io {
namespace {

template <typename T>
std::vector<std::byte> to_bytes(const std::vector<T>& values) {
    std::vector<std::byte> bytes(values.size() * sizeof(T));
    if (!bytes.empty()) {
        std::memcpy(bytes.data(), values.data(), bytes.size());
    }
    return bytes;
}

template <typename T>
std::vector<T> from_bytes(const std::vector<std::byte>& bytes) {
    std::vector<T> values(bytes.size() / sizeof(T));
    if (!bytes.empty()) {
        std::memcpy(values.data(), bytes.data(), bytes.size());
    }
    return values;
}

// Converts `values` (elements of `from`, given as raw integers of the right width) to `to`.
template <typename Out, typename In>
std::vector<Out> convert(DType from, const std::vector<In>& values, DType to) {
    const std::vector<std::byte> src = to_bytes(values);
    std::vector<std::byte> dst(values.size() * dtype_size(to));
    convert_elements(from, src, to, dst);
    return from_bytes<Out>(dst);
}

std::uint32_t crc_of(const std::vector<std::byte>& bytes) {
    return static_cast<std::uint32_t>(
        crc32(0, reinterpret_cast<const Bytef*>(bytes.data()), static_cast<uInt>(bytes.size())));
}

bool is_nan32(std::uint32_t bits) {
    return (bits & 0x7FFFFFFFu) > 0x7F800000u;
}
bool is_nan_bf16(std::uint16_t bits) {
    return (bits & 0x7FFFu) > 0x7F80u;
}
bool is_nan_fp16(std::uint16_t bits) {
    return (bits & 0x7FFFu) > 0x7C00u;
}

struct F32Golden {
    std::uint32_t f32;
    std::uint16_t bf16;  // torch
    std::uint16_t fp16;  // torch
};

// clang-format off
constexpr F32Golden kF32Goldens[] = {
    {0x00000000, 0x0000, 0x0000},  // +0
    {0x80000000, 0x8000, 0x8000},  // -0
    {0x7F800000, 0x7F80, 0x7C00},  // +Inf
    {0xFF800000, 0xFF80, 0xFC00},  // -Inf
    {0x7F7FFFFF, 0x7F80, 0x7C00},  // max finite fp32: rounds up to Inf in bf16
    {0xFF7FFFFF, 0xFF80, 0xFC00},
    {0x00000001, 0x0000, 0x0000},  // smallest fp32 subnormal
    {0x80000001, 0x8000, 0x8000},
    {0x007FFFFF, 0x0080, 0x0000},  // largest fp32 subnormal: bf16 rounds up to min normal
    {0x00800000, 0x0080, 0x0000},  // smallest fp32 normal
    {0x3F800000, 0x3F80, 0x3C00},  // 1
    {0xBF800000, 0xBF80, 0xBC00},  // -1
    {0x3F808000, 0x3F80, 0x3C04},  // bf16 tie, even below: down
    {0x3F818000, 0x3F82, 0x3C0C},  // bf16 tie, odd below: up
    {0x3F808001, 0x3F81, 0x3C04},  // just above the bf16 tie
    {0x3F807FFF, 0x3F80, 0x3C04},  // just below the bf16 tie
    {0xBF818000, 0xBF82, 0xBC0C},
    {0x7F7F8000, 0x7F80, 0x7C00},  // bf16 tie above the largest bf16 (odd): Inf
    {0x7F7F7FFF, 0x7F7F, 0x7C00},  // just below it: largest finite bf16
    {0xFF7F8000, 0xFF80, 0xFC00},
    {0x477FE000, 0x4780, 0x7BFF},  // 65504, largest fp16
    {0x477FEFFF, 0x4780, 0x7BFF},  // just below 65520: stays finite
    {0x477FF000, 0x4780, 0x7C00},  // 65520, the fp16 tie above 65504 (odd): Inf
    {0xC77FF000, 0xC780, 0xFC00},
    {0x477FF001, 0x4780, 0x7C00},
    {0x47800000, 0x4780, 0x7C00},  // 65536
    {0x501502F9, 0x5015, 0x7C00},  // 1e10
    {0x33800000, 0x3380, 0x0001},  // 2^-24, smallest fp16 subnormal
    {0x33000000, 0x3300, 0x0000},  // 2^-25: tie between 0 and 2^-24, to even (0)
    {0x33000001, 0x3300, 0x0001},  // just above it
    {0x32FFFFFF, 0x3300, 0x0000},  // just below it
    {0x33C00000, 0x33C0, 0x0002},  // 1.5 * 2^-24: tie, to even (2)
    {0x34200000, 0x3420, 0x0002},  // 2.5 * 2^-24: tie, to even (2)
    {0x387FC000, 0x3880, 0x03FF},  // largest fp16 subnormal
    {0x38800000, 0x3880, 0x0400},  // 2^-14, smallest fp16 normal
    {0x387FE000, 0x3880, 0x0400},  // tie between the largest subnormal and 2^-14: up
    {0x387FDFFF, 0x3880, 0x03FF},
    {0xB87FE000, 0xB880, 0x8400},
    {0x38000000, 0x3800, 0x0200},  // 2^-15
    {0x3F801000, 0x3F80, 0x3C00},  // fp16 tie, even below: down
    {0x3F803000, 0x3F80, 0x3C02},  // fp16 tie, odd below: up
    {0x3F801001, 0x3F80, 0x3C01},
    {0x3F800FFF, 0x3F80, 0x3C00},
    {0x3EAAAAAB, 0x3EAB, 0x3555},  // 1/3
    {0x40490FDB, 0x4049, 0x4248},  // pi
    {0xC0490FDB, 0xC049, 0xC248},
    {0x3DCCCCCD, 0x3DCD, 0x2E66},  // 0.1
};

// NaN inputs: torch's fp16 result, and our canonical bf16 (torch writes 0xFFFF).
constexpr F32Golden kF32NaNs[] = {
    {0x7FC00000, 0x7FC0, 0x7E00},
    {0xFFC00000, 0xFFC0, 0xFE00},
    {0x7F800001, 0x7FC0, 0x7E00},  // signalling
    {0x7FFFFFFF, 0x7FC0, 0x7E00},
    {0xFFFFFFFF, 0xFFC0, 0xFE00},
};
// clang-format on

TEST(DtypeConvert, Fp32ToBf16AndFp16MatchTorchOnSpecialValues) {
    for (const F32Golden& g : kF32Goldens) {
        EXPECT_EQ(fp32_bits_to_bf16_bits(g.f32), g.bf16) << std::hex << g.f32;
        EXPECT_EQ(fp32_bits_to_fp16_bits(g.f32), g.fp16) << std::hex << g.f32;
    }
}

TEST(DtypeConvert, NaNBecomesCanonicalQuietNaNWithSign) {
    for (const F32Golden& g : kF32NaNs) {
        const std::uint16_t bf16 = fp32_bits_to_bf16_bits(g.f32);
        const std::uint16_t fp16 = fp32_bits_to_fp16_bits(g.f32);
        EXPECT_TRUE(is_nan_bf16(bf16)) << std::hex << g.f32;
        EXPECT_TRUE(is_nan_fp16(fp16)) << std::hex << g.f32;
        EXPECT_EQ(bf16, g.bf16) << std::hex << g.f32;
        EXPECT_EQ(fp16, g.fp16) << std::hex << g.f32;  // torch's fp16 NaN bits too
    }
    EXPECT_EQ(kBf16QuietNaN, 0x7FC0);
    EXPECT_EQ(kFp16QuietNaN, 0x7E00);
}

TEST(DtypeConvert, SpanApiMatchesScalarKernelsAcrossBlocksAndTail) {
    // 3 full blocks of the kernel and a tail, with the goldens repeated.
    std::vector<std::uint32_t> input;
    while (input.size() < 64 * 3 + 17) {
        for (const F32Golden& g : kF32Goldens) {
            input.push_back(g.f32);
        }
        for (const F32Golden& g : kF32NaNs) {
            input.push_back(g.f32);
        }
    }
    input.resize(64 * 3 + 17);
    const auto bf16 = convert<std::uint16_t>(DType::kF32, input, DType::kBF16);
    const auto fp16 = convert<std::uint16_t>(DType::kF32, input, DType::kF16);
    ASSERT_EQ(bf16.size(), input.size());
    for (std::size_t i = 0; i < input.size(); ++i) {
        EXPECT_EQ(bf16[i], fp32_bits_to_bf16_bits(input[i])) << i;
        EXPECT_EQ(fp16[i], fp32_bits_to_fp16_bits(input[i])) << i;
    }
}

// Inputs (hi << 16) | lo for every hi and 16 low halves chosen around both rounding points
// (bit 16 for bf16, bit 13 for fp16), in hi-major order: 1,048,576 values.
std::vector<std::uint32_t> sampled_fp32_inputs() {
    constexpr std::uint32_t kLows[] = {0x0000, 0x0001, 0x7FFF, 0x8000, 0x8001, 0xFFFF,
                                       0x1000, 0x0FFF, 0x1001, 0x2000, 0x3000, 0xE000,
                                       0xF000, 0xEFFF, 0xF001, 0x5A5A};
    std::vector<std::uint32_t> inputs;
    inputs.reserve(65536 * std::size(kLows));
    for (std::uint32_t hi = 0; hi < 65536; ++hi) {
        for (std::uint32_t lo : kLows) {
            inputs.push_back((hi << 16) | lo);
        }
    }
    return inputs;
}

TEST(DtypeConvert, SampledFp32InputsMatchTorchCrc) {
    // torch CRCs, NaN outputs set to the canonical NaN (for fp16 that changed nothing).
    const std::vector<std::uint32_t> inputs = sampled_fp32_inputs();
    const std::vector<std::byte> src = to_bytes(inputs);
    std::vector<std::byte> dst(inputs.size() * 2);
    convert_elements(DType::kF32, src, DType::kBF16, dst);
    EXPECT_EQ(crc_of(dst), 0x8EC29B07u);
    convert_elements(DType::kF32, src, DType::kF16, dst);
    EXPECT_EQ(crc_of(dst), 0x65ADCD0Au);
}

#if defined(__FLT16_MAX__)
TEST(DtypeConvert, Fp16AgreesWithCompilerFloat16Conversion) {
    // An independent IEEE implementation (GCC's _Float16, soft-float on plain x86-64).
    for (std::uint64_t u = 0; u <= 0xFFFFFFFFu; u += 4099) {
        const auto bits = static_cast<std::uint32_t>(u);
        if (is_nan32(bits)) {
            continue;
        }
        const auto reference =
            std::bit_cast<std::uint16_t>(static_cast<_Float16>(std::bit_cast<float>(bits)));
        ASSERT_EQ(fp32_bits_to_fp16_bits(bits), reference) << std::hex << bits;
    }
}
#endif

TEST(DtypeConvert, SixteenBitToFp32ExhaustiveMatchesTorchCrc) {
    std::vector<std::uint16_t> all(65536);
    for (std::uint32_t i = 0; i < 65536; ++i) {
        all[i] = static_cast<std::uint16_t>(i);
    }
    const std::vector<std::byte> src = to_bytes(all);
    std::vector<std::byte> dst(65536 * 4);
    convert_elements(DType::kF16, src, DType::kF32, dst);
    EXPECT_EQ(crc_of(dst), 0x4E646BCAu);
    convert_elements(DType::kBF16, src, DType::kF32, dst);
    EXPECT_EQ(crc_of(dst), 0x093B1249u);
}

TEST(DtypeConvert, Fp16ToFp32SpecialValues) {
    EXPECT_EQ(fp16_bits_to_fp32_bits(0x0001), 0x33800000u);  // 2^-24
    EXPECT_EQ(fp16_bits_to_fp32_bits(0x03FF), 0x387FC000u);  // largest subnormal
    EXPECT_EQ(fp16_bits_to_fp32_bits(0x0400), 0x38800000u);
    EXPECT_EQ(fp16_bits_to_fp32_bits(0x8000), 0x80000000u);
    EXPECT_EQ(fp16_bits_to_fp32_bits(0x7BFF), 0x477FE000u);
    EXPECT_EQ(fp16_bits_to_fp32_bits(0xFC00), 0xFF800000u);
    // NaN payload kept, quiet bit set (torch: 0x7C01 -> 0x7FC02000, 0xFC01 -> 0xFFC02000).
    EXPECT_EQ(fp16_bits_to_fp32_bits(0x7C01), 0x7FC02000u);
    EXPECT_EQ(fp16_bits_to_fp32_bits(0xFC01), 0xFFC02000u);
    EXPECT_EQ(fp16_bits_to_fp32_bits(0x7FFF), 0x7FFFE000u);
    EXPECT_EQ(fp16_bits_to_fp32_bits(0xFE00), 0xFFC00000u);
    EXPECT_EQ(bf16_bits_to_fp32_bits(0x7F81), 0x7F810000u);
    EXPECT_EQ(bf16_bits_to_fp32_bits(0x8001), 0x80010000u);
}

TEST(DtypeConvert, RoundTripsThroughFp32AreExact) {
    for (std::uint32_t h = 0; h < 65536; ++h) {
        const auto bits = static_cast<std::uint16_t>(h);
        if (!is_nan_fp16(bits)) {
            ASSERT_EQ(fp32_bits_to_fp16_bits(fp16_bits_to_fp32_bits(bits)), bits) << h;
        }
        if (!is_nan_bf16(bits)) {
            ASSERT_EQ(fp32_bits_to_bf16_bits(bf16_bits_to_fp32_bits(bits)), bits) << h;
        }
    }
}

struct F64Golden {
    std::uint64_t f64;
    std::uint32_t f32;
    std::uint16_t bf16;
    std::uint16_t fp16;
};

// clang-format off
constexpr F64Golden kF64Goldens[] = {
    {0x3FF0100000400000ULL, 0x3F808000, 0x3F80, 0x3C04},  // 1+2^-8+2^-30: double rounding to bf16 1.0
    {0x3FF0020000400000ULL, 0x3F801000, 0x3F80, 0x3C00},  // 1+2^-11+2^-30: double rounding to fp16 1.0
    {0x3FF0000010000000ULL, 0x3F800000, 0x3F80, 0x3C00},
    {0xBFF0100000400000ULL, 0xBF808000, 0xBF80, 0xBC04},
    {0x40EFFDFFFFFFFAA2ULL, 0x477FF000, 0x4780, 0x7C00},  // 65519.99999999 -> fp32 65520 -> Inf
    {0x40EFFE0000000000ULL, 0x477FF000, 0x4780, 0x7C00},  // 65520
    {0x47EFFFFFF0000000ULL, 0x7F800000, 0x7F80, 0x7C00},  // fp32 max + half ulp: Inf
    {0x7E37E43C8800759CULL, 0x7F800000, 0x7F80, 0x7C00},  // 1e300
    {0xFE37E43C8800759CULL, 0xFF800000, 0xFF80, 0xFC00},
    {0x01A56E1FC2F8F359ULL, 0x00000000, 0x0000, 0x0000},  // 1e-300
    {0x36A0000000000000ULL, 0x00000001, 0x0000, 0x0000},  // 2^-149
    {0x3690000000000000ULL, 0x00000000, 0x0000, 0x0000},  // 2^-150: tie, to even (0)
    {0x369000001AD7F29BULL, 0x00000001, 0x0000, 0x0000},
    {0x3FB999999999999AULL, 0x3DCCCCCD, 0x3DCD, 0x2E66},  // 0.1
    {0x8000000000000000ULL, 0x80000000, 0x8000, 0x8000},
    {0x7FF0000000000000ULL, 0x7F800000, 0x7F80, 0x7C00},
};
// clang-format on

TEST(DtypeConvert, Fp64MatchesTorchIncludingDoubleRounding) {
    std::vector<std::uint64_t> input;
    for (const F64Golden& g : kF64Goldens) {
        input.push_back(g.f64);
    }
    const auto f32 = convert<std::uint32_t>(DType::kF64, input, DType::kF32);
    const auto bf16 = convert<std::uint16_t>(DType::kF64, input, DType::kBF16);
    const auto fp16 = convert<std::uint16_t>(DType::kF64, input, DType::kF16);
    for (std::size_t i = 0; i < input.size(); ++i) {
        EXPECT_EQ(f32[i], kF64Goldens[i].f32) << i;
        EXPECT_EQ(bf16[i], kF64Goldens[i].bf16) << i;
        EXPECT_EQ(fp16[i], kF64Goldens[i].fp16) << i;
    }
    const std::vector<std::uint64_t> nan{0x7FF8000000000000ULL, 0xFFF8000000000001ULL};
    const auto nan_bf16 = convert<std::uint16_t>(DType::kF64, nan, DType::kBF16);
    EXPECT_EQ(nan_bf16[0], 0x7FC0);
    EXPECT_EQ(nan_bf16[1], 0xFFC0);
    EXPECT_TRUE(is_nan32(convert<std::uint32_t>(DType::kF64, nan, DType::kF32)[1]));
}

struct IntGolden {
    std::int64_t value;
    std::uint32_t f32;
    std::uint16_t bf16;
    std::uint16_t fp16;
};

// clang-format off
constexpr IntGolden kI64Goldens[] = {
    {0, 0x00000000, 0x0000, 0x0000},
    {1, 0x3F800000, 0x3F80, 0x3C00},
    {-1, 0xBF800000, 0xBF80, 0xBC00},
    {16777217, 0x4B800000, 0x4B80, 0x7C00},  // 2^24+1: tie, to even
    {16777219, 0x4B800002, 0x4B80, 0x7C00},  // 2^24+3: tie, up
    {-16777217, 0xCB800000, 0xCB80, 0xFC00},
    {2155872257, 0x4F008000, 0x4F00, 0x7C00},  // 2^31+2^23+1: double rounding to bf16
    {9007199254740993, 0x5A000000, 0x5A00, 0x7C00},
    {4611686293305294849, 0x5E800001, 0x5E80, 0x7C00},
    {std::numeric_limits<std::int64_t>::max(), 0x5F000000, 0x5F00, 0x7C00},
    {std::numeric_limits<std::int64_t>::min(), 0xDF000000, 0xDF00, 0xFC00},
    {65519, 0x477FEF00, 0x4780, 0x7BFF},
    {65520, 0x477FF000, 0x4780, 0x7C00},
    {65536, 0x47800000, 0x4780, 0x7C00},
    {2049, 0x45001000, 0x4500, 0x6800},
    {2051, 0x45003000, 0x4500, 0x6802},
    {257, 0x43808000, 0x4380, 0x5C04},
    {259, 0x43818000, 0x4382, 0x5C0C},
    {123456789, 0x4CEB79A3, 0x4CEB, 0x7C00},
};

constexpr IntGolden kI32Goldens[] = {
    {16777217, 0x4B800000, 0x4B80, 0x7C00},
    {2147483647, 0x4F000000, 0x4F00, 0x7C00},
    {-2147483648, 0xCF000000, 0xCF00, 0xFC00},
    {50331651, 0x4C400001, 0x4C40, 0x7C00},
    {65520, 0x477FF000, 0x4780, 0x7C00},
    {-65520, 0xC77FF000, 0xC780, 0xFC00},
    {2147483584, 0x4F000000, 0x4F00, 0x7C00},
};

constexpr IntGolden kI16Goldens[] = {
    {-32768, 0xC7000000, 0xC700, 0xF800},
    {32767, 0x46FFFE00, 0x4700, 0x7800},
    {257, 0x43808000, 0x4380, 0x5C04},
    {259, 0x43818000, 0x4382, 0x5C0C},
    {-259, 0xC3818000, 0xC382, 0xDC0C},
    {2049, 0x45001000, 0x4500, 0x6800},
    {2051, 0x45003000, 0x4500, 0x6802},
    {0, 0x00000000, 0x0000, 0x0000},
    {1, 0x3F800000, 0x3F80, 0x3C00},
};
// clang-format on

template <typename Int, std::size_t N>
void check_int_goldens(DType dtype, const IntGolden (&goldens)[N]) {
    std::vector<Int> input;
    for (const IntGolden& g : goldens) {
        input.push_back(static_cast<Int>(g.value));
    }
    const auto f32 = convert<std::uint32_t>(dtype, input, DType::kF32);
    const auto bf16 = convert<std::uint16_t>(dtype, input, DType::kBF16);
    const auto fp16 = convert<std::uint16_t>(dtype, input, DType::kF16);
    for (std::size_t i = 0; i < N; ++i) {
        EXPECT_EQ(f32[i], goldens[i].f32) << goldens[i].value;
        EXPECT_EQ(bf16[i], goldens[i].bf16) << goldens[i].value;
        EXPECT_EQ(fp16[i], goldens[i].fp16) << goldens[i].value;
    }
}

TEST(DtypeConvert, IntegersMatchTorch) {
    check_int_goldens<std::int64_t>(DType::kI64, kI64Goldens);
    check_int_goldens<std::int32_t>(DType::kI32, kI32Goldens);
    check_int_goldens<std::int16_t>(DType::kI16, kI16Goldens);
}

TEST(DtypeConvert, SmallIntegersAndBool) {
    const std::vector<std::int8_t> i8{-128, -1, 0, 1, 127};
    const auto i8_f32 = convert<std::uint32_t>(DType::kI8, i8, DType::kF32);
    EXPECT_EQ(i8_f32,
              (std::vector<std::uint32_t>{0xC3000000, 0xBF800000, 0, 0x3F800000, 0x42FE0000}));
    const std::vector<std::uint8_t> u8{0, 1, 255};
    EXPECT_EQ((convert<std::uint16_t>(DType::kU8, u8, DType::kBF16)),
              (std::vector<std::uint16_t>{0x0000, 0x3F80, 0x437F}));
    EXPECT_EQ((convert<std::uint16_t>(DType::kU8, u8, DType::kF16)),
              (std::vector<std::uint16_t>{0x0000, 0x3C00, 0x5BF8}));
    // Any non-zero byte is true.
    const std::vector<std::uint8_t> flags{0, 1, 2, 255};
    EXPECT_EQ((convert<std::uint32_t>(DType::kBool, flags, DType::kF32)),
              (std::vector<std::uint32_t>{0, 0x3F800000, 0x3F800000, 0x3F800000}));
    EXPECT_EQ((convert<std::uint16_t>(DType::kBool, flags, DType::kBF16)),
              (std::vector<std::uint16_t>{0, 0x3F80, 0x3F80, 0x3F80}));
    EXPECT_EQ((convert<std::uint16_t>(DType::kBool, flags, DType::kF16)),
              (std::vector<std::uint16_t>{0, 0x3C00, 0x3C00, 0x3C00}));
}

TEST(DtypeConvert, SixteenBitCrossConversionsMatchTorch) {
    const std::vector<std::uint16_t> fp16{0x3C00, 0x3C01, 0x3C03, 0x7BFF, 0x0001, 0x03FF,
                                          0x7C00, 0xFC00, 0x8000, 0x3555, 0x4248};
    EXPECT_EQ((convert<std::uint16_t>(DType::kF16, fp16, DType::kBF16)),
              (std::vector<std::uint16_t>{0x3F80, 0x3F80, 0x3F80, 0x4780, 0x3380, 0x3880, 0x7F80,
                                          0xFF80, 0x8000, 0x3EAB, 0x4049}));
    const std::vector<std::uint16_t> bf16{0x3F80, 0x3F81, 0x477F, 0x4780, 0x3380, 0x3300,
                                          0x3340, 0x7F80, 0x0001, 0x8000, 0x3E2B, 0x4049};
    EXPECT_EQ((convert<std::uint16_t>(DType::kBF16, bf16, DType::kF16)),
              (std::vector<std::uint16_t>{0x3C00, 0x3C08, 0x7BF8, 0x7C00, 0x0001, 0x0000, 0x0001,
                                          0x7C00, 0x0000, 0x8000, 0x3158, 0x4248}));
}

TEST(DtypeConvert, IdentityIsAByteCopyForEveryDtype) {
    std::vector<std::byte> src(64);
    for (std::size_t i = 0; i < src.size(); ++i) {
        src[i] = static_cast<std::byte>(i * 37 + 11);
    }
    for (int raw = 0; raw <= static_cast<int>(DType::kF8E5M2); ++raw) {
        const auto dtype = static_cast<DType>(raw);
        EXPECT_FALSE(conversion_needed(dtype, dtype));
        EXPECT_TRUE(conversion_supported(dtype, dtype));
        std::vector<std::byte> dst(src.size());
        convert_elements(dtype, src, dtype, dst);
        EXPECT_EQ(dst, src) << raw;
    }
    // Even a signalling NaN keeps its bits.
    const std::vector<std::uint32_t> snan{0x7F800001u};
    EXPECT_EQ((convert<std::uint32_t>(DType::kF32, snan, DType::kF32)), snan);
}

TEST(DtypeConvert, SupportedPairs) {
    const DType sources[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kF64, DType::kI64,
                             DType::kI32, DType::kI16, DType::kI8,   DType::kU8,  DType::kBool};
    const DType targets[] = {DType::kF32, DType::kBF16, DType::kF16};
    for (DType from : sources) {
        for (DType to : targets) {
            EXPECT_TRUE(conversion_supported(from, to));
            EXPECT_EQ(conversion_needed(from, to), from != to);
            // Every supported pair runs, on an empty and on a non-empty buffer.
            std::vector<std::byte> src(3 * dtype_size(from), std::byte{1});
            std::vector<std::byte> dst(3 * dtype_size(to));
            convert_elements(from, src, to, dst);
            convert_elements(from, {}, to, {});
        }
    }
    EXPECT_FALSE(conversion_supported(DType::kF32, DType::kI64));
    EXPECT_FALSE(conversion_supported(DType::kF32, DType::kF64));
    EXPECT_FALSE(conversion_supported(DType::kU16, DType::kF32));
    EXPECT_FALSE(conversion_supported(DType::kC64, DType::kBF16));
}

TEST(DtypeConvert, RejectsUnsupportedPairsAndMismatchedSizes) {
    std::vector<std::byte> src(8);
    std::vector<std::byte> dst(16);
    auto expect_internal = [](auto&& call) {
        try {
            call();
            ADD_FAILURE() << "no error";
        } catch (const Error& e) {
            EXPECT_EQ(e.kind(), ErrorKind::kInternal) << e.what();
        }
    };
    expect_internal([&] { convert_elements(DType::kF32, src, DType::kI64, dst); });
    expect_internal([&] { convert_elements(DType::kU32, src, DType::kF32, src); });
    // 8 bytes of fp32 are two elements: 4 bytes of bf16, not 16.
    expect_internal([&] { convert_elements(DType::kF32, src, DType::kBF16, dst); });
    // 6 bytes are not whole fp32 elements.
    expect_internal([&] {
        convert_elements(DType::kF32, std::span(src).first(6), DType::kBF16,
                         std::span(dst).first(3));
    });
}

// How far two replicas differ is reported in the elements' own values.
TEST(DtypeConvert, ElementValueReadsEveryDtypeAsANumber) {
    auto value = [](DType dtype, auto element) {
        std::byte bytes[sizeof element];
        std::memcpy(bytes, &element, sizeof element);
        return element_value(dtype, bytes);
    };
    EXPECT_EQ(value(DType::kF32, 1.5f), 1.5);
    EXPECT_EQ(value(DType::kF64, -2.25), -2.25);
    EXPECT_EQ(value(DType::kBF16, std::uint16_t{0x3fc0}), 1.5);  // bf16 1.5
    EXPECT_EQ(value(DType::kF16, std::uint16_t{0x3e00}), 1.5);   // fp16 1.5
    EXPECT_EQ(value(DType::kI64, std::int64_t{-7}), -7.0);
    EXPECT_EQ(value(DType::kI8, std::int8_t{-3}), -3.0);
    EXPECT_EQ(value(DType::kU8, std::uint8_t{200}), 200.0);
    EXPECT_EQ(value(DType::kBool, std::uint8_t{1}), 1.0);
    EXPECT_TRUE(std::isnan(value(DType::kF32, std::numeric_limits<float>::quiet_NaN())));
}

}  // namespace
}  // namespace z2f::io
