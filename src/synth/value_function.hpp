// The values of synthetic checkpoints: element e of tensor `name` is a pure function of
// (seed, name, e), so a consolidated output can be checked element by element without
// storing the truth anywhere.
//
// Definition (all integer arithmetic is modulo 2^64):
//
//   key(seed, name)  = mix(seed ^ fnv1a64(name))
//   u                = mix(key + (e + 1) * 0x9E3779B97F4A7C15)
//   fp32 bits        = sign | exponent | mantissa with
//                      sign     = bit 63 of u                         (bit 31)
//                      exponent = 120 + ((u >> 23) & 7)               (bits 23..30)
//                      mantissa = u & 0x7FFFFF                        (bits 0..22)
//
// where mix is the splitmix64 finaliser (xor-shift 30, multiply, xor-shift 27, multiply,
// xor-shift 31) and fnv1a64 is FNV-1a over the UTF-8 bytes of the name. Every value is a
// normal float with magnitude in [2^-7, 2): never zero (a zero read back means padding or a
// hole was taken for data), never NaN or infinite, exactly representable in fp32 but almost
// never in bf16/fp16 (reading the 16-bit copy instead of the master shows up).
//
// The fp32 value is the master weight (stage 1/2 single_partition_of_fp32_groups, stage 3
// fp32_flat_groups). The model-dtype copy (module tensors, frozen parameters, float buffers)
// is that value rounded to nearest-even in bf16 or fp16 (all values are in fp16's normal
// range). Integer buffers (position_ids) hold e itself.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "common/dtype.hpp"

namespace z2f::synth {

inline constexpr std::uint64_t mix64(std::uint64_t z) noexcept {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

std::uint64_t fnv1a64(std::string_view text) noexcept;

// The per-tensor key of the definition above.
inline std::uint64_t value_key(std::uint64_t seed, std::string_view name) noexcept {
    return mix64(seed ^ fnv1a64(name));
}

// fp32 bit pattern of element `index` of the tensor with key `key`.
inline constexpr std::uint32_t element_bits(std::uint64_t key, std::uint64_t index) noexcept {
    std::uint64_t u = mix64(key + (index + 1) * 0x9E3779B97F4A7C15ull);
    auto sign = static_cast<std::uint32_t>(u >> 63) << 31;
    auto exponent = (120u + static_cast<std::uint32_t>((u >> 23) & 7u)) << 23;
    auto mantissa = static_cast<std::uint32_t>(u & 0x7FFFFFu);
    return sign | exponent | mantissa;
}

// Round-to-nearest-even narrowing of finite fp32 bit patterns (no NaN handling: the value
// function never produces one).
inline constexpr std::uint16_t bf16_bits_from_f32(std::uint32_t bits) noexcept {
    return static_cast<std::uint16_t>((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}
// Valid for normal fp32 values whose fp16 rounding is a normal fp16 (|x| in [2^-14, 65504]).
inline constexpr std::uint16_t f16_bits_from_f32(std::uint32_t bits) noexcept {
    std::uint32_t sign = (bits >> 16) & 0x8000u;
    std::uint32_t magnitude = bits & 0x7FFFFFFFu;
    // Rebias the exponent (127 -> 15) in place, then round the 13 dropped mantissa bits to
    // nearest even; a carry out of the mantissa correctly bumps the exponent.
    std::uint32_t rebiased = magnitude - (112u << 23);
    std::uint32_t rounded = rebiased + 0xFFFu + ((rebiased >> 13) & 1u);
    return static_cast<std::uint16_t>(sign | (rounded >> 13));
}

float f32_from_bits(std::uint32_t bits) noexcept;
float f32_from_bf16_bits(std::uint16_t bits) noexcept;
float f32_from_f16_bits(std::uint16_t bits) noexcept;

// The fp32 master value of element `index` of parameter `name`.
float expected_element(std::uint64_t seed, std::string_view name, std::uint64_t index) noexcept;

// The value a model-dtype tensor (module weight, frozen parameter, float buffer) holds for the
// same element, widened back to fp32: the bf16/fp16 rounding of expected_element, or
// expected_element itself for fp32 models.
float expected_model_element(std::uint64_t seed, std::string_view name, std::uint64_t index,
                             DType model_dtype) noexcept;

// Writes elements [first, first + count) of the tensor with key `key` in `dtype` (fp32, bf16
// or fp16), little-endian, to `out` (count * itemsize bytes). Any other dtype is an internal
// error.
void fill_values(std::uint64_t key, std::uint64_t first, DType dtype, std::span<std::byte> out);

// Writes int64 values first, first + 1, ... to `out` (8 bytes each): position_ids.
void fill_arange_i64(std::uint64_t first, std::span<std::byte> out);

}  // namespace z2f::synth
