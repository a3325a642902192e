#include "synth/value_function.hpp"

#include <bit>
#include <cstring>
#include <string>

#include "common/errors.hpp"

namespace z2f::synth {
namespace {

// Values are produced into a small typed array, then copied out: the loops stay simple enough
// for the compiler to unroll/vectorize, and the byte span needs no alignment.
constexpr std::size_t kBatch = 1024;

template <typename Word, typename Convert>
void fill_words(std::uint64_t key, std::uint64_t first, std::span<std::byte> out, Convert convert) {
    Word batch[kBatch];
    std::size_t count = out.size() / sizeof(Word);
    for (std::size_t done = 0; done < count;) {
        std::size_t n = std::min(kBatch, count - done);
        std::uint64_t base = first + done;
        for (std::size_t k = 0; k < n; ++k) {
            batch[k] = convert(element_bits(key, base + k));
        }
        // Little-endian hosts only (the whole program assumes it, see the torch byteorder).
        std::memcpy(out.data() + done * sizeof(Word), batch, n * sizeof(Word));
        done += n;
    }
}

}  // namespace

std::uint64_t fnv1a64(std::string_view text) noexcept {
    std::uint64_t hash = 0xCBF29CE484222325ull;
    for (char c : text) {
        hash ^= static_cast<unsigned char>(c);
        hash *= 0x100000001B3ull;
    }
    return hash;
}

float f32_from_bits(std::uint32_t bits) noexcept {
    return std::bit_cast<float>(bits);
}

float f32_from_bf16_bits(std::uint16_t bits) noexcept {
    return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

float f32_from_f16_bits(std::uint16_t bits) noexcept {
    std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
    std::uint32_t exponent = (bits >> 10) & 0x1Fu;
    std::uint32_t mantissa = bits & 0x3FFu;
    if (exponent == 0) {
        // Subnormal or zero: value = mantissa * 2^-24, exact in fp32.
        float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
        return sign != 0 ? -magnitude : magnitude;
    }
    if (exponent == 0x1F) {
        return std::bit_cast<float>(sign | 0x7F800000u | (mantissa << 13));
    }
    return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

float expected_element(std::uint64_t seed, std::string_view name, std::uint64_t index) noexcept {
    return f32_from_bits(element_bits(value_key(seed, name), index));
}

float expected_model_element(std::uint64_t seed, std::string_view name, std::uint64_t index,
                             DType model_dtype) noexcept {
    std::uint32_t bits = element_bits(value_key(seed, name), index);
    switch (model_dtype) {
        case DType::kBF16:
            return f32_from_bf16_bits(bf16_bits_from_f32(bits));
        case DType::kF16:
            return f32_from_f16_bits(f16_bits_from_f32(bits));
        default:
            return f32_from_bits(bits);
    }
}

void fill_values(std::uint64_t key, std::uint64_t first, DType dtype, std::span<std::byte> out) {
    switch (dtype) {
        case DType::kF32:
            fill_words<std::uint32_t>(key, first, out, [](std::uint32_t b) { return b; });
            return;
        case DType::kBF16:
            fill_words<std::uint16_t>(key, first, out, bf16_bits_from_f32);
            return;
        case DType::kF16:
            fill_words<std::uint16_t>(key, first, out, f16_bits_from_f32);
            return;
        default:
            throw_internal_error("synth: no value function for dtype " +
                                 std::string(dtype_display_name(dtype)));
    }
}

void fill_arange_i64(std::uint64_t first, std::span<std::byte> out) {
    std::int64_t batch[kBatch];
    std::size_t count = out.size() / sizeof(std::int64_t);
    for (std::size_t done = 0; done < count;) {
        std::size_t n = std::min(kBatch, count - done);
        for (std::size_t k = 0; k < n; ++k) {
            batch[k] = static_cast<std::int64_t>(first + done + k);
        }
        std::memcpy(out.data() + done * sizeof(std::int64_t), batch, n * sizeof(std::int64_t));
        done += n;
    }
}

}  // namespace z2f::synth
