#include "output/hdf5_recording_driver.hpp"

#include <cstddef>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "zero2fp32/error.hpp"

namespace z2f::hdf5 {
namespace {

std::vector<std::byte> filled(std::size_t count, std::uint8_t value) {
    return std::vector<std::byte>(count, static_cast<std::byte>(value));
}

std::vector<std::byte> read(const RecordedFile& file, std::uint64_t offset, std::size_t count) {
    std::vector<std::byte> out(count, std::byte{0xEE});
    file.read(offset, out);
    return out;
}

std::vector<std::byte> concat(std::initializer_list<std::vector<std::byte>> parts) {
    std::vector<std::byte> out;
    for (const auto& part : parts) {
        out.insert(out.end(), part.begin(), part.end());
    }
    return out;
}

TEST(RecordedFile, UnwrittenBytesReadAsZero) {
    RecordedFile file;
    EXPECT_EQ(read(file, 1000, 16), filled(16, 0));
    file.write(4, filled(4, 0xAA));
    EXPECT_EQ(read(file, 0, 12), concat({filled(4, 0), filled(4, 0xAA), filled(4, 0)}));
    EXPECT_EQ(file.recorded_bytes(), 4u);
    EXPECT_EQ(file.eof(), 8u);
}

TEST(RecordedFile, LatestWriteWinsAndOverlapsMerge) {
    RecordedFile file;
    file.write(0, filled(4, 0x11));
    file.write(8, filled(4, 0x22));
    EXPECT_EQ(file.range_count(), 2u);
    // Overlaps the tail of the first range, the gap, and the head of the second.
    file.write(2, filled(8, 0x33));
    EXPECT_EQ(file.range_count(), 1u);
    EXPECT_EQ(file.recorded_bytes(), 12u);
    EXPECT_EQ(read(file, 0, 12), concat({filled(2, 0x11), filled(8, 0x33), filled(2, 0x22)}));
    // A rewrite inside a range changes bytes in place.
    file.write(5, filled(2, 0x44));
    EXPECT_EQ(file.range_count(), 1u);
    EXPECT_EQ(read(file, 4, 4), concat({filled(1, 0x33), filled(2, 0x44), filled(1, 0x33)}));
    // A write covering everything replaces it.
    file.write(0, filled(20, 0x55));
    EXPECT_EQ(file.range_count(), 1u);
    EXPECT_EQ(file.recorded_bytes(), 20u);
    EXPECT_EQ(read(file, 0, 20), filled(20, 0x55));
}

TEST(RecordedFile, AdjacentWritesStaySeparateButReadJoined) {
    RecordedFile file;
    file.write(0, filled(4, 0x01));
    file.write(4, filled(4, 0x02));
    EXPECT_EQ(file.range_count(), 2u);
    EXPECT_EQ(read(file, 2, 4), concat({filled(2, 0x01), filled(2, 0x02)}));
    EXPECT_EQ(file.recorded_bytes_in(2, 4), 4u);
    EXPECT_EQ(file.recorded_bytes_in(6, 10), 2u);
}

TEST(RecordedFile, ReservedRawRangesDropStaleBytesAndRefuseWrites) {
    RecordedFile file;
    file.write(0, filled(16, 0x77));
    file.reserve_raw(4, 8);  // [4, 12)
    EXPECT_EQ(file.recorded_bytes(), 8u);
    EXPECT_EQ(file.recorded_bytes_in(4, 8), 0u);
    EXPECT_EQ(read(file, 0, 16), concat({filled(4, 0x77), filled(8, 0), filled(4, 0x77)}));
    EXPECT_THROW(file.write(11, filled(1, 0x01)), Error);
    EXPECT_THROW(file.write(0, filled(5, 0x01)), Error);
    EXPECT_THROW(file.write(0, filled(32, 0x01)), Error);
    EXPECT_NO_THROW(file.write(12, filled(4, 0x01)));
    EXPECT_NO_THROW(file.write(0, filled(4, 0x01)));
    // Two datasets never share storage.
    EXPECT_THROW(file.reserve_raw(10, 4), Error);
    EXPECT_NO_THROW(file.reserve_raw(100, 0));
}

TEST(RecordedFile, TruncateDropsBytesBeyondTheEnd) {
    RecordedFile file;
    file.write(0, filled(10, 0x10));
    file.write(20, filled(10, 0x20));
    file.truncate(25);
    EXPECT_EQ(file.eof(), 25u);
    EXPECT_EQ(file.recorded_bytes(), 15u);
    EXPECT_EQ(read(file, 20, 10), concat({filled(5, 0x20), filled(5, 0)}));
    file.clear();
    EXPECT_EQ(file.recorded_bytes(), 0u);
    EXPECT_EQ(file.eof(), 0u);
}

TEST(RecordedFile, RangesOverflowingTheAddressSpaceAreRefused) {
    RecordedFile file;
    EXPECT_THROW(file.write(UINT64_MAX - 1, filled(4, 0)), Error);
    EXPECT_THROW(file.reserve_raw(UINT64_MAX - 1, 4), Error);
}

}  // namespace
}  // namespace z2f::hdf5
