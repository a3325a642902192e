// Binary encoding of per-file checkpoint metadata (FileMeta), the only payload that crosses
// MPI in the metadata phase: rank r interprets files r, r+P, ... and all ranks all-gather the
// encoded results.
//
// Format: a sequence of fields, little-endian; integers u8/u32/u64, strings and vectors as a
// u64 count followed by their elements, optionals as a u8 flag followed by the value. The
// encoding is an implementation detail between ranks of one run (same binary), so it has no
// version field; the decoder still checks every length against the buffer.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "checkpoint/assemble.hpp"

namespace z2f {

void encode_file_meta(const FileMeta& meta, std::vector<std::byte>& out);
// Decodes one FileMeta starting at `pos` and advances it.
FileMeta decode_file_meta(std::span<const std::byte> bytes, std::size_t& pos);

}  // namespace z2f
