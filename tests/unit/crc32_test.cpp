#include "common/crc32.hpp"

#include <vector>

#include <gtest/gtest.h>

#include "common/bytes.hpp"

namespace z2f {
namespace {

TEST(Crc32, KnownValues) {
    // The standard CRC-32 check value, and the CRCs torch 1.13 stored for "3\n" and "little".
    EXPECT_EQ(crc32_of(as_byte_span("123456789")), 0xCBF43926u);
    EXPECT_EQ(crc32_of(as_byte_span("3\n")), 0x55679ED1u);
    EXPECT_EQ(crc32_of({}), 0u);
}

TEST(Crc32, UpdateAndJoinAgreeWithOneShot) {
    std::vector<std::byte> data(10000);
    for (std::size_t i = 0; i < data.size(); ++i) {
        data[i] = static_cast<std::byte>((i * 131 + 7) & 0xFF);
    }
    std::uint32_t whole = crc32_of(data);
    for (std::size_t cut : {std::size_t{0}, std::size_t{1}, std::size_t{4095}, data.size()}) {
        std::span<const std::byte> a(data.data(), cut);
        std::span<const std::byte> b(data.data() + cut, data.size() - cut);
        EXPECT_EQ(crc32_update(crc32_of(a), b), whole) << cut;
        EXPECT_EQ(crc32_join(crc32_of(a), crc32_of(b), b.size()), whole) << cut;
    }
}

TEST(Crc32, JoinOfZeroBlocksMatchesDirectCrc) {
    // The copy engine joins extents; a doubling chain of joins must equal the plain CRC.
    std::vector<std::byte> zeros(1 << 16);
    std::uint32_t block = crc32_of(std::span(zeros).first(1024));
    std::uint64_t length = 1024;
    while (length < zeros.size()) {
        block = crc32_join(block, block, length);
        length *= 2;
    }
    EXPECT_EQ(block, crc32_of(zeros));
}

TEST(Crc32, OfZerosMatchesDirectCrc) {
    std::vector<std::byte> zeros(3 * 4096 * 5 + 777);
    for (std::size_t length : {std::size_t{0}, std::size_t{1}, std::size_t{4095}, std::size_t{4096},
                               std::size_t{4097}, std::size_t{3 * 4096}, zeros.size()}) {
        EXPECT_EQ(crc32_of_zeros(length), crc32_of(std::span(zeros).first(length))) << length;
    }
}

}  // namespace
}  // namespace z2f
