#include "common/crc32.hpp"

#include <algorithm>
#include <limits>

#include <zlib.h>
#if Z2F_HAVE_ISAL
#include <isa-l/crc.h>
#endif

namespace z2f {
namespace {

static_assert(sizeof(z_off_t) == 8, "crc32_combine needs a 64-bit z_off_t for records over 2 GiB");

}  // namespace

const char* crc32_implementation() noexcept {
    return Z2F_HAVE_ISAL ? "ISA-L" : "zlib";
}

std::uint32_t crc32_update(std::uint32_t crc, std::span<const std::byte> data) noexcept {
    if (data.empty()) {
        return crc;  // an empty span may have a null pointer; neither library is asked about that
    }
#if Z2F_HAVE_ISAL
    // crc32_gzip_refl follows zlib's convention: it takes and returns the finished CRC
    // (complemented on entry and on exit inside), so crc32(c, p, n) == crc32_gzip_refl(c, p, n)
    // for any c; the unit tests check this against known CRCs. Its length is 64-bit: no pieces.
    return ::crc32_gzip_refl(crc, reinterpret_cast<const unsigned char*>(data.data()), data.size());
#else
    // zlib's length is a uInt (32 bits): a span over 4 GiB goes in pieces.
    constexpr std::size_t kPiece = std::numeric_limits<uInt>::max() & ~std::size_t{0xFFFF};
    const auto* bytes = reinterpret_cast<const Bytef*>(data.data());
    uLong running = crc;
    for (std::size_t done = 0; done < data.size();) {
        const std::size_t piece = std::min(kPiece, data.size() - done);
        running = ::crc32(running, bytes + done, static_cast<uInt>(piece));
        done += piece;
    }
    return static_cast<std::uint32_t>(running);
#endif
}

std::uint32_t crc32_of(std::span<const std::byte> data) noexcept {
    return crc32_update(0, data);
}

std::uint32_t crc32_join(std::uint32_t crc_a, std::uint32_t crc_b, std::uint64_t len_b) noexcept {
    // z_off_t is signed 64-bit (checked above); no record comes near 2^63 bytes.
    return static_cast<std::uint32_t>(::crc32_combine(crc_a, crc_b, static_cast<z_off_t>(len_b)));
}

std::uint32_t crc32_of_zeros(std::uint64_t length) noexcept {
    // Zeros commute, so the run is built from the binary digits of `length` in any order:
    // run_crc is the CRC of 2^k zero bytes, doubled at each step.
    static constexpr std::size_t kBlock = 4096;
    static const std::byte zeros[kBlock] = {};
    std::uint64_t blocks = length / kBlock;
    std::uint64_t rest = length % kBlock;
    std::uint32_t crc = crc32_of(std::span<const std::byte>(zeros, static_cast<std::size_t>(rest)));
    std::uint32_t run_crc = crc32_of(zeros);
    std::uint64_t run_length = kBlock;
    while (blocks != 0) {
        if ((blocks & 1u) != 0) {
            crc = crc32_join(crc, run_crc, run_length);
        }
        blocks >>= 1;
        if (blocks != 0) {
            run_crc = crc32_join(run_crc, run_crc, run_length);
            run_length *= 2;
        }
    }
    return crc;
}

}  // namespace z2f
