// The input CRC check's side of a copy (run/input_check.hpp): the raw bytes a copier reads, as
// they pass through its buffer, are folded into the CRC-32s of the check pieces they belong to.
// Used by the copier (direct_copier.hpp) and the in-memory reader's filler (memory_filler.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "common/extent.hpp"
#include "io/posix_file.hpp"

namespace z2f::io {

// Where a copy is in its ranges: those not yet reached (from `next`) and those begun, not yet
// complete (`open`: several when the ranges of a row-parallel weight's shards interleave).
struct CheckCursor {
    std::size_t next = 0;
    std::vector<std::size_t> open;
};

// Folds `chunk`, the input bytes at file offset `offset` of extent `extent` of a copy, into
// `piece_crcs[range.piece]` for every range of `ranges` (ordered by first extent, then offset)
// that holds the extent and overlaps the chunk. Chunks come in read order (extent by extent,
// each in file order), so every range, whose extents follow one another in the file, is folded
// in file order.
void fold_check_ranges(std::span<const CrcRange> ranges, std::span<std::uint32_t> piece_crcs,
                       std::uint32_t extent, std::uint64_t offset, std::span<const std::byte> chunk,
                       CheckCursor& cursor);

// The CRC-32 of bytes [offset, offset + length) of `input`, read through `buffer` for the
// input check alone; `after_chunk(offset, bytes)` is called after each chunk (a chance to stop).
std::uint32_t checksum_range(const File& input, std::uint64_t offset, std::uint64_t length,
                             std::span<std::byte> buffer,
                             const std::function<void(std::uint64_t, std::size_t)>& after_chunk);

}  // namespace z2f::io
