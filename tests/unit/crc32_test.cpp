// CRC-32: known vectors, and bit-for-bit agreement with zlib's crc32/crc32_combine (the
// reference every zip reader uses) over many sizes, misalignments, initial values and cuts.
#include "common/crc32.hpp"

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <zlib.h>

#include "common/bytes.hpp"

namespace z2f {
namespace {

TEST(Crc32, KnownValues) {
    // The standard CRC-32 check value, and the CRCs torch 1.13 stored for "3\n" and "little".
    EXPECT_EQ(crc32_of(as_byte_span("123456789")), 0xCBF43926u);
    EXPECT_EQ(crc32_of(as_byte_span("3\n")), 0x55679ED1u);
    EXPECT_EQ(crc32_of({}), 0u);
}

TEST(Crc32, StandardVectors) {
    EXPECT_EQ(crc32_of(as_byte_span("a")), 0xE8B7BE43u);
    EXPECT_EQ(crc32_of(as_byte_span("abc")), 0x352441C2u);
    EXPECT_EQ(crc32_of(as_byte_span("The quick brown fox jumps over the lazy dog")), 0x414FA339u);
    // RFC 3720 B.4 lists these for CRC-32C; for CRC-32 (zlib) they are:
    EXPECT_EQ(crc32_of(std::vector<std::byte>(32, std::byte{0})), 0x190A55ADu);
    EXPECT_EQ(crc32_of(std::vector<std::byte>(32, std::byte{0xFF})), 0xFF6CAB0Bu);
}

std::uint32_t zlib_crc(std::uint32_t crc, std::span<const std::byte> data) {
    return static_cast<std::uint32_t>(
        ::crc32(crc, reinterpret_cast<const Bytef*>(data.data()), static_cast<uInt>(data.size())));
}

std::vector<std::byte> random_bytes(std::size_t size, std::uint64_t seed) {
    std::mt19937_64 random(seed);
    std::vector<std::byte> bytes(size);
    for (auto& byte : bytes) {
        byte = static_cast<std::byte>(random() & 0xFF);
    }
    return bytes;
}

TEST(Crc32, EqualsZlibForEverySizeAndAlignment) {
    // Vectorised CRCs have separate paths for short inputs, head and tail bytes around aligned
    // blocks, and folding loops of 64 or 256 bytes: every size up to 1,100 at every start offset
    // in a 64-byte line, then larger odd sizes.
    const std::vector<std::byte> data = random_bytes((std::size_t{1} << 20) + 4096, 1);
    const std::span<const std::byte> all(data);
    for (std::size_t offset = 0; offset < 64; ++offset) {
        for (std::size_t size = 0; size <= 1100; ++size) {
            auto piece = all.subspan(offset, size);
            ASSERT_EQ(crc32_of(piece), zlib_crc(0, piece))
                << "offset " << offset << " size " << size;
        }
    }
    for (std::size_t size :
         {std::size_t{4095}, std::size_t{4096}, std::size_t{4097}, std::size_t{65535},
          std::size_t{65536 + 3}, std::size_t{999'999}, std::size_t{1} << 20}) {
        for (std::size_t offset :
             {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{31}, std::size_t{4095}}) {
            auto piece = all.subspan(offset, size);
            EXPECT_EQ(crc32_of(piece), zlib_crc(0, piece))
                << "offset " << offset << " size " << size;
        }
    }
}

TEST(Crc32, UpdateFromAnyCrcEqualsZlib) {
    // Continuing from an arbitrary running value must follow zlib's convention exactly (the
    // running value is the finished CRC, not its complement).
    const std::vector<std::byte> data = random_bytes(70'000, 2);
    std::mt19937 random(3);
    for (int trial = 0; trial < 200; ++trial) {
        std::uint32_t start = static_cast<std::uint32_t>(random());
        std::size_t offset = random() % 1000;
        std::size_t size = random() % (data.size() - offset);
        auto piece = std::span<const std::byte>(data).subspan(offset, size);
        ASSERT_EQ(crc32_update(start, piece), zlib_crc(start, piece)) << trial;
    }
    EXPECT_EQ(crc32_update(0x12345678u, {}), 0x12345678u);
}

TEST(Crc32, PiecewiseUpdatesAndJoinsAtRandomCuts) {
    const std::vector<std::byte> data = random_bytes(300'000, 4);
    const std::span<const std::byte> all(data);
    const std::uint32_t whole = zlib_crc(0, all);
    std::mt19937 random(5);
    for (int trial = 0; trial < 50; ++trial) {
        // Cut into up to 8 pieces; fold them by update and by join, both must give the whole.
        std::vector<std::size_t> cuts = {0, data.size()};
        for (int i = 0; i < 7; ++i) {
            cuts.push_back(random() % (data.size() + 1));
        }
        std::sort(cuts.begin(), cuts.end());
        std::uint32_t updated = 0;
        std::uint32_t joined = 0;
        for (std::size_t i = 0; i + 1 < cuts.size(); ++i) {
            auto piece = all.subspan(cuts[i], cuts[i + 1] - cuts[i]);
            updated = crc32_update(updated, piece);
            joined = crc32_join(joined, crc32_of(piece), piece.size());
        }
        EXPECT_EQ(updated, whole) << trial;
        EXPECT_EQ(joined, whole) << trial;
    }
}

TEST(Crc32, OfZerosOverGigabytesMatchesStreamedZeros) {
    // Lengths past 2^31 and 2^32 exercise the 64-bit lengths of join (z_off_t) and of the
    // doubling chain; streaming 1 MiB of zeros over and over gives the reference.
    const std::vector<std::byte> zeros(std::size_t{1} << 20);
    std::uint32_t streamed = 0;
    std::uint64_t length = 0;
    for (std::uint64_t target : {std::uint64_t{1} << 31, (std::uint64_t{1} << 32) + (1 << 20)}) {
        while (length < target) {
            streamed = crc32_update(streamed, zeros);
            length += zeros.size();
        }
        EXPECT_EQ(crc32_of_zeros(length), streamed) << length;
        EXPECT_EQ(crc32_of_zeros(length + 5), crc32_update(streamed, std::span(zeros).first(5)))
            << length;
    }
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
