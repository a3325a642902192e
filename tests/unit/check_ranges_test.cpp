// Folding a copy's read chunks into the input check's pieces (io/check_ranges.hpp): a range over
// one extent, several ranges in one extent, and ranges over every other extent whose chunks
// interleave (a row-parallel weight's shards), each chunk folded once into its own piece.
#include "io/check_ranges.hpp"

#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "common/crc32.hpp"

namespace z2f::io {
namespace {

std::vector<std::byte> file_bytes(std::size_t size) {
    std::vector<std::byte> bytes(size);
    for (std::size_t i = 0; i < size; ++i)
        bytes[i] = static_cast<std::byte>((i * 131 + 7) % 251);
    return bytes;
}

// Feeds every extent of `extents` (file offsets) to the fold in read order, in chunks of
// random sizes, and returns the pieces' CRCs.
std::vector<std::uint32_t> fold_all(const std::vector<std::byte>& file,
                                    const std::vector<SourceExtent>& extents,
                                    const std::vector<CrcRange>& ranges, std::size_t pieces,
                                    std::mt19937& random) {
    std::vector<std::uint32_t> crcs(pieces, 0);
    CheckCursor cursor;
    for (std::uint32_t e = 0; e < extents.size(); ++e) {
        std::uint64_t done = 0;
        while (done < extents[e].length) {
            const std::uint64_t size =
                std::min<std::uint64_t>(extents[e].length - done,
                                        std::uniform_int_distribution<std::uint64_t>(1, 9)(random));
            const std::uint64_t offset = extents[e].offset + done;
            fold_check_ranges(ranges, crcs, e, offset,
                              std::span<const std::byte>(file).subspan(offset, size), cursor);
            done += size;
        }
    }
    EXPECT_TRUE(cursor.open.empty());
    EXPECT_EQ(cursor.next, ranges.size());
    return crcs;
}

std::uint32_t crc_of(const std::vector<std::byte>& file, std::uint64_t offset,
                     std::uint64_t length) {
    return crc32_of(std::span<const std::byte>(file).subspan(offset, length));
}

TEST(CheckRanges, RangesInOneExtentAndOverOne) {
    const std::vector<std::byte> file = file_bytes(200);
    // Extent 0: pieces 0 and 1 inside it, then its tail unchecked (another copy's piece);
    // extent 1: piece 2, the whole extent.
    const std::vector<SourceExtent> extents = {{0, 10, 50}, {0, 120, 30}};
    const std::vector<CrcRange> ranges = {
        {0, 1, 1, 10, 15, 0}, {0, 1, 1, 25, 20, 1}, {1, 1, 1, 120, 30, 2}};
    for (unsigned seed = 0; seed < 20; ++seed) {
        std::mt19937 random(seed);
        const std::vector<std::uint32_t> crcs = fold_all(file, extents, ranges, 3, random);
        EXPECT_EQ(crcs[0], crc_of(file, 10, 15));
        EXPECT_EQ(crcs[1], crc_of(file, 25, 20));
        EXPECT_EQ(crcs[2], crc_of(file, 120, 30));
    }
}

TEST(CheckRanges, InterleavedRowsOfTwoShardsAreTwoRanges) {
    // Output rows alternate between shard A (rows at 0, 10, 20 of the file) and shard B (100,
    // 110, 120); A's range starts inside its first row (the bytes before belong to another
    // piece), B's ends inside its last one. A row read twice by an extent outside a range
    // (a replica, extent 6) is not folded into it again.
    const std::vector<std::byte> file = file_bytes(200);
    const std::vector<SourceExtent> extents = {{0, 0, 10},  {0, 100, 10}, {0, 10, 10}, {0, 110, 10},
                                               {0, 20, 10}, {0, 120, 10}, {0, 10, 10}};
    const std::vector<CrcRange> ranges = {{0, 3, 2, 4, 26, 0}, {1, 3, 2, 100, 27, 1}};
    for (unsigned seed = 0; seed < 20; ++seed) {
        std::mt19937 random(seed);
        const std::vector<std::uint32_t> crcs = fold_all(file, extents, ranges, 2, random);
        EXPECT_EQ(crcs[0], crc_of(file, 4, 26));
        EXPECT_EQ(crcs[1], crc_of(file, 100, 27));
    }
}

TEST(CheckRanges, ARangeOutOfItsPiecesIsAnInternalError) {
    const std::vector<std::byte> file = file_bytes(20);
    const std::vector<CrcRange> ranges = {{0, 1, 1, 0, 10, 5}};
    std::vector<std::uint32_t> crcs(1, 0);
    CheckCursor cursor;
    EXPECT_ANY_THROW(
        fold_check_ranges(ranges, crcs, 0, 0, std::span<const std::byte>(file).first(10), cursor));
}

}  // namespace
}  // namespace z2f::io
