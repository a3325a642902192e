// Element conversion kernels: what the execute phase applies to tensor bytes on their way from an
// input extent to an output slot when the plan asks for another dtype.
//
// Byte format: elements are packed little-endian, row-major, with dtype_size() bytes each, as in
// torch storages and safetensors data. This module assumes a little-endian host.
//
// Rules (bit-identical to torch's `tensor.to(dtype)` / `.float()` on a CPU, for every non-NaN
// input; the unit tests pin golden bit patterns produced by torch 1.13):
// - fp32 -> bf16: round to nearest, ties to even, on the bit pattern:
//       bf16 = (u + 0x7FFF + ((u >> 16) & 1)) >> 16        (c10::round_to_nearest_even)
//   Values at or past the rounding boundary above 0x1.FEp127 become +-Inf; fp32 subnormals keep
//   their rounded bits (no flush to zero).
// - fp32 -> fp16: IEEE 754 round to nearest, ties to even, with fp16 subnormals. |x| >= 65520
//   (exactly halfway between the largest fp16, 65504, and 2^16) becomes +-Inf, like torch.
// - NaN -> bf16 / fp16: a canonical quiet NaN with the input's sign: sign|0x7FC0 (bf16) and
//   sign|0x7E00 (fp16). fp16 matches torch exactly. torch's bf16 NaN depends on the code path
//   (0x7FC0 from the scalar c10 code, 0xFFFF from the AVX2/AVX512 kernels), so NaN is only
//   comparable by class, never by bits.
// - bf16 -> fp32: the 16 bits become the high half (exact, NaN payload kept).
// - fp16 -> fp32: exact, subnormals included; a NaN keeps its payload and gets the quiet bit set,
//   as torch (and the F16C instruction) do.
// - f64, integers and bool -> bf16 / fp16: first to fp32 (C++ conversion, round to nearest even),
//   then fp32 -> 16 bits. This double rounding is what torch does (its casts go through `float`),
//   and it differs from a direct rounding, e.g. f64 1+2^-8+2^-30 -> bf16 1.0, not 1+2^-7.
// - int64 / int32 -> fp32: round to nearest even (what `.float()` does); int16, int8, uint8: exact.
// - bool -> 1.0 / 0.0; any non-zero byte counts as true.
// - identity (from == to): a byte copy, whatever the dtype.
//
// Performance: each call dispatches once on the dtype pair, then runs a branch-free loop over
// fixed-size blocks that g++ -O2 vectorizes (no per-element switch). The kernels rely on the
// default floating-point environment (round to nearest); this program never changes it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "common/dtype.hpp"

namespace z2f::io {

inline constexpr std::uint16_t kBf16QuietNaN = 0x7FC0;  // sign bit added from the input
inline constexpr std::uint16_t kFp16QuietNaN = 0x7E00;

// True when the bytes cannot be copied as they are (the dtypes differ).
bool conversion_needed(DType from, DType to) noexcept;

// True when convert_elements() handles the pair: identity for every dtype, and
// {F32, F16, BF16, F64, I64, I32, I16, I8, U8, BOOL} -> {F32, BF16, F16}.
bool conversion_supported(DType from, DType to) noexcept;

// Converts src (whole elements of `from`) into dst (the same number of elements of `to`).
// src and dst must not overlap. Throws an internal error when the pair is not supported or the
// span sizes do not describe the same element count: both are bugs of the caller (the plan).
void convert_elements(DType from, std::span<const std::byte> src, DType to,
                      std::span<std::byte> dst);

// Single-element kernels on bit patterns, exactly as convert_elements() applies them.
std::uint16_t fp32_bits_to_bf16_bits(std::uint32_t bits) noexcept;
std::uint16_t fp32_bits_to_fp16_bits(std::uint32_t bits) noexcept;
std::uint32_t bf16_bits_to_fp32_bits(std::uint16_t bits) noexcept;
std::uint32_t fp16_bits_to_fp32_bits(std::uint16_t bits) noexcept;

// The element at `bytes` (little-endian, `dtype`) as a double: how far two replicas of a
// tensor differ is reported in these units. Types without arithmetic (complex, ...) give
// infinity: they differ, by an unknown amount.
double element_value(DType dtype, const std::byte* bytes) noexcept;

}  // namespace z2f::io
