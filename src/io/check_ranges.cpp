#include "io/check_ranges.hpp"

#include <algorithm>
#include <string>

#include "common/crc32.hpp"
#include "common/errors.hpp"

namespace z2f::io {

void fold_check_ranges(std::span<const CrcRange> ranges, std::span<std::uint32_t> piece_crcs,
                       std::uint32_t extent, std::uint64_t offset, std::span<const std::byte> chunk,
                       CheckCursor& cursor) {
    const std::uint64_t end = offset + chunk.size();
    // The ranges that begin by this chunk's end.
    while (cursor.next < ranges.size()) {
        const CrcRange& range = ranges[cursor.next];
        if (range.extent > extent || (range.extent == extent && range.offset >= end))
            break;
        cursor.open.push_back(cursor.next++);
    }
    std::size_t kept = 0;
    for (const std::size_t index : cursor.open) {
        const CrcRange& range = ranges[index];
        if (range.piece >= piece_crcs.size())
            throw_internal_error("check piece " + std::to_string(range.piece) + " out of range");
        const std::uint64_t range_end = range.offset + range.length;
        if (range.holds_extent(extent)) {
            const std::uint64_t from = std::max(range.offset, offset);
            const std::uint64_t to = std::min(range_end, end);
            if (to > from) {
                std::uint32_t& crc = piece_crcs[range.piece];
                crc = crc32_update(crc, chunk.subspan(static_cast<std::size_t>(from - offset),
                                                      static_cast<std::size_t>(to - from)));
            }
        }
        const bool complete =
            extent > range.last_extent() || (extent == range.last_extent() && range_end <= end);
        if (!complete)
            cursor.open[kept++] = index;
    }
    cursor.open.resize(kept);
}

std::uint32_t checksum_range(const File& input, std::uint64_t offset, std::uint64_t length,
                             std::span<std::byte> buffer,
                             const std::function<void(std::uint64_t, std::size_t)>& after_chunk) {
    std::uint32_t crc = 0;
    std::uint64_t done = 0;
    while (done < length) {
        std::span<std::byte> chunk = buffer.first(
            static_cast<std::size_t>(std::min<std::uint64_t>(buffer.size(), length - done)));
        input.read_exact(offset + done, chunk);
        crc = crc32_update(crc, chunk);
        after_chunk(offset + done, chunk.size());
        done += chunk.size();
    }
    return crc;
}

}  // namespace z2f::io
