#include "io/dtype_convert.hpp"

#include <bit>
#include <cstring>
#include <limits>
#include <string>

#include "common/errors.hpp"

static_assert(std::endian::native == std::endian::little,
              "tensor bytes are little-endian; a big-endian host needs byte swaps here");

namespace z2f::io {
namespace {

// ---- per-element kernels: branch-free so that the block loops below vectorize ----

inline std::uint16_t to_bf16(std::uint32_t u) noexcept {
    const std::uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
    const std::uint32_t nan = ((u >> 16) & 0x8000u) | kBf16QuietNaN;
    return static_cast<std::uint16_t>((u & 0x7FFFFFFFu) > 0x7F800000u ? nan : rounded);
}

inline std::uint16_t to_fp16(std::uint32_t u) noexcept {
    const std::uint32_t sign = (u >> 16) & 0x8000u;
    const std::uint32_t a = u & 0x7FFFFFFFu;
    // Normal results: rebias the exponent (127 -> 15, i.e. subtract 112 << 23) and round the 13
    // dropped mantissa bits to nearest even with the same carry trick as bf16. A carry out of
    // the mantissa correctly bumps the exponent; everything at or above 65520 lands on or past
    // 0x7C00 and is clamped to Inf. For a < 0x38000000 the subtraction wraps, but those inputs
    // take the subnormal branch.
    std::uint32_t normal = (a - 0x38000000u + 0x0FFFu + ((a >> 13) & 1u)) >> 13;
    normal = normal < 0x7C00u ? normal : 0x7C00u;
    // Subnormal results (|x| < 2^-14): in [0.5, 1) an fp32 ulp is 2^-24, the fp16 subnormal
    // step, so the fp32 adder computing |x| + 0.5 rounds |x| to that grid (nearest even); the
    // low mantissa bits are then the fp16 encoding, 0x400 being the smallest normal.
    const std::uint32_t subnormal =
        std::bit_cast<std::uint32_t>(std::bit_cast<float>(a) + 0.5f) - 0x3F000000u;
    std::uint32_t result = a < 0x38800000u ? subnormal : normal;
    result = a > 0x7F800000u ? std::uint32_t{kFp16QuietNaN} : result;
    return static_cast<std::uint16_t>(sign | result);
}

inline std::uint32_t from_bf16(std::uint16_t h) noexcept {
    return std::uint32_t{h} << 16;
}

inline std::uint32_t from_fp16(std::uint16_t h) noexcept {
    const std::uint32_t sign = (std::uint32_t{h} & 0x8000u) << 16;
    const std::uint32_t exponent = (std::uint32_t{h} >> 10) & 0x1Fu;
    const std::uint32_t mantissa = std::uint32_t{h} & 0x3FFu;
    const std::uint32_t normal = ((exponent + 112u) << 23) | (mantissa << 13);
    // Inf keeps a zero mantissa; a NaN keeps its payload and becomes quiet.
    const std::uint32_t special =
        0x7F800000u | (mantissa << 13) | (mantissa != 0 ? 0x00400000u : 0u);
    // Subnormal: mantissa * 2^-24, exact in fp32 (an int below 2^10 times a power of two).
    const std::uint32_t subnormal = std::bit_cast<std::uint32_t>(
        static_cast<float>(static_cast<std::int32_t>(mantissa)) * 0x1p-24f);
    const std::uint32_t magnitude =
        exponent == 0 ? subnormal : (exponent == 0x1Fu ? special : normal);
    return sign | magnitude;
}

// ---- the block loop ----

// Elements per block. A compile-time trip count lets g++ -O2 (whose default "very cheap" cost
// model refuses loops that need a scalar epilogue) vectorize the inner loop; the tail of fewer
// than kBlock elements runs the same body once more.
constexpr std::size_t kBlock = 64;

template <typename In, typename Out, typename Op>
void map_elements(const std::byte* src, std::byte* dst, std::size_t count, Op op) {
    In in[kBlock];
    Out out[kBlock];
    std::size_t done = 0;
    for (; done + kBlock <= count; done += kBlock) {
        std::memcpy(in, src + done * sizeof(In), sizeof in);
        for (std::size_t k = 0; k < kBlock; ++k) {
            out[k] = op(in[k]);
        }
        std::memcpy(dst + done * sizeof(Out), out, sizeof out);
    }
    const std::size_t rest = count - done;
    if (rest == 0) {
        return;
    }
    std::memcpy(in, src + done * sizeof(In), rest * sizeof(In));
    for (std::size_t k = 0; k < rest; ++k) {
        out[k] = op(in[k]);
    }
    std::memcpy(dst + done * sizeof(Out), out, rest * sizeof(Out));
}

// Output encoders: fp32 value -> output element.
struct EncodeF32 {
    using Out = std::uint32_t;
    Out operator()(float value) const noexcept { return std::bit_cast<std::uint32_t>(value); }
};
struct EncodeBf16 {
    using Out = std::uint16_t;
    Out operator()(float value) const noexcept {
        return to_bf16(std::bit_cast<std::uint32_t>(value));
    }
};
struct EncodeFp16 {
    using Out = std::uint16_t;
    Out operator()(float value) const noexcept {
        return to_fp16(std::bit_cast<std::uint32_t>(value));
    }
};

// Runs `encode(decode(element))` over the block loop for the source dtype `from`. Returns false
// when `from` has no decoder.
template <typename Encode>
bool convert_from(DType from, const std::byte* src, std::byte* dst, std::size_t count,
                  Encode encode) {
    using Out = typename Encode::Out;
    switch (from) {
        case DType::kF32:
            map_elements<std::uint32_t, Out>(src, dst, count, [encode](std::uint32_t v) {
                return encode(std::bit_cast<float>(v));
            });
            return true;
        case DType::kF64:
            map_elements<std::uint64_t, Out>(src, dst, count, [encode](std::uint64_t v) {
                return encode(static_cast<float>(std::bit_cast<double>(v)));
            });
            return true;
        case DType::kF16:
            map_elements<std::uint16_t, Out>(src, dst, count, [encode](std::uint16_t v) {
                return encode(std::bit_cast<float>(from_fp16(v)));
            });
            return true;
        case DType::kBF16:
            map_elements<std::uint16_t, Out>(src, dst, count, [encode](std::uint16_t v) {
                return encode(std::bit_cast<float>(from_bf16(v)));
            });
            return true;
        case DType::kI64:
            map_elements<std::int64_t, Out>(src, dst, count, [encode](std::int64_t v) {
                return encode(static_cast<float>(v));
            });
            return true;
        case DType::kI32:
            map_elements<std::int32_t, Out>(src, dst, count, [encode](std::int32_t v) {
                return encode(static_cast<float>(v));
            });
            return true;
        case DType::kI16:
            map_elements<std::int16_t, Out>(src, dst, count, [encode](std::int16_t v) {
                return encode(static_cast<float>(v));
            });
            return true;
        case DType::kI8:
            map_elements<std::int8_t, Out>(
                src, dst, count, [encode](std::int8_t v) { return encode(static_cast<float>(v)); });
            return true;
        case DType::kU8:
            map_elements<std::uint8_t, Out>(src, dst, count, [encode](std::uint8_t v) {
                return encode(static_cast<float>(v));
            });
            return true;
        case DType::kBool:
            map_elements<std::uint8_t, Out>(
                src, dst, count, [encode](std::uint8_t v) { return encode(v != 0 ? 1.0f : 0.0f); });
            return true;
        default:
            return false;
    }
}

bool is_decodable(DType from) noexcept {
    switch (from) {
        case DType::kF32:
        case DType::kF64:
        case DType::kF16:
        case DType::kBF16:
        case DType::kI64:
        case DType::kI32:
        case DType::kI16:
        case DType::kI8:
        case DType::kU8:
        case DType::kBool:
            return true;
        default:
            return false;
    }
}

[[noreturn]] void throw_unsupported_pair(DType from, DType to) {
    std::string what = "no element conversion from ";
    what += dtype_display_name(from);
    what += " to ";
    what += dtype_display_name(to);
    throw_internal_error(what);
}

}  // namespace

bool conversion_needed(DType from, DType to) noexcept {
    return from != to;
}

bool conversion_supported(DType from, DType to) noexcept {
    if (from == to) {
        return true;
    }
    const bool float_target = to == DType::kF32 || to == DType::kBF16 || to == DType::kF16;
    return float_target && is_decodable(from);
}

void convert_elements(DType from, std::span<const std::byte> src, DType to,
                      std::span<std::byte> dst) {
    const std::size_t in_size = dtype_size(from);
    const std::size_t out_size = dtype_size(to);
    if (src.size() % in_size != 0 || dst.size() != src.size() / in_size * out_size) {
        throw_internal_error("convert_elements: " + std::to_string(src.size()) + " bytes of " +
                             std::string(dtype_display_name(from)) + " cannot become " +
                             std::to_string(dst.size()) + " bytes of " +
                             std::string(dtype_display_name(to)));
    }
    const std::size_t count = src.size() / in_size;
    if (count == 0) {
        return;
    }
    if (from == to) {
        std::memcpy(dst.data(), src.data(), src.size());
        return;
    }
    bool done = false;
    switch (to) {
        case DType::kF32:
            done = convert_from(from, src.data(), dst.data(), count, EncodeF32{});
            break;
        case DType::kBF16:
            done = convert_from(from, src.data(), dst.data(), count, EncodeBf16{});
            break;
        case DType::kF16:
            done = convert_from(from, src.data(), dst.data(), count, EncodeFp16{});
            break;
        default:
            break;
    }
    if (!done) {
        throw_unsupported_pair(from, to);
    }
}

std::uint16_t fp32_bits_to_bf16_bits(std::uint32_t bits) noexcept {
    return to_bf16(bits);
}
std::uint16_t fp32_bits_to_fp16_bits(std::uint32_t bits) noexcept {
    return to_fp16(bits);
}
std::uint32_t bf16_bits_to_fp32_bits(std::uint16_t bits) noexcept {
    return from_bf16(bits);
}
std::uint32_t fp16_bits_to_fp32_bits(std::uint16_t bits) noexcept {
    return from_fp16(bits);
}

double element_value(DType dtype, const std::byte* bytes) noexcept {
    auto load = [&](auto zero) {
        decltype(zero) value;
        std::memcpy(&value, bytes, sizeof value);
        return static_cast<double>(value);
    };
    switch (dtype) {
        case DType::kF64:
            return load(double{});
        case DType::kF32:
            return load(float{});
        case DType::kBF16:
        case DType::kF16: {
            std::uint16_t half;
            std::memcpy(&half, bytes, 2);
            std::uint32_t bits =
                dtype == DType::kBF16 ? bf16_bits_to_fp32_bits(half) : fp16_bits_to_fp32_bits(half);
            float value;
            std::memcpy(&value, &bits, 4);
            return static_cast<double>(value);
        }
        case DType::kI64:
            return load(std::int64_t{});
        case DType::kI32:
            return load(std::int32_t{});
        case DType::kI16:
            return load(std::int16_t{});
        case DType::kI8:
            return load(std::int8_t{});
        case DType::kU8:
        case DType::kBool:
            return load(std::uint8_t{});
        case DType::kU16:
            return load(std::uint16_t{});
        case DType::kU32:
            return load(std::uint32_t{});
        case DType::kU64:
            return load(std::uint64_t{});
        default:
            return std::numeric_limits<double>::infinity();  // no arithmetic: differs
    }
}

}  // namespace z2f::io
