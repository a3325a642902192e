// CRC-32 as ZIP archives use it (the zlib polynomial 0xEDB88320, reflected, initial value 0,
// final complement: the same value as zlib's crc32()).
//
// The one place where the program computes CRCs, and never with a hand-written table: the
// bytes go through ISA-L's crc32_gzip_refl (carry-less multiplication, picked at run time for
// the CPU: about 10x zlib's crc32 here, see docs/io-engine.md), or zlib's crc32 in a build
// configured without ISA-L; the joins go through zlib's crc32_combine. The copy engine checksums a
// torch `.bin` storage record extent by extent (possibly on several threads), then joins the pieces
// in file order:
//
//     crc(A ++ B) == crc32_join(crc(A), crc(B), size(B))
//
// and crc32_of of an empty span is 0, the CRC a zip entry of length zero carries.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace z2f {

// "ISA-L" or "zlib": what computes crc32_update in this build.
const char* crc32_implementation() noexcept;

// CRC-32 of `data`.
std::uint32_t crc32_of(std::span<const std::byte> data) noexcept;

// Continues a running CRC: crc32_update(crc32_of(A), B) == crc32_of(A ++ B).
std::uint32_t crc32_update(std::uint32_t crc, std::span<const std::byte> data) noexcept;

// CRC of the concatenation A ++ B from crc(A), crc(B) and the length of B. O(log len_b).
std::uint32_t crc32_join(std::uint32_t crc_a, std::uint32_t crc_b, std::uint64_t len_b) noexcept;

// CRC of `length` zero bytes without touching them: O(log length) joins of doubling zero runs.
// Records left as holes in sparse files (zero bytes never written) need their CRC all the same.
std::uint32_t crc32_of_zeros(std::uint64_t length) noexcept;

}  // namespace z2f
