// CRC-32 throughput of every implementation this machine's Debian packages offer, on buffers
// warm in the cache: zlib's crc32, ISA-L's crc32_gzip_refl, libdeflate's libdeflate_crc32 (when
// it was found at configure time) and the project's own crc32_update (whatever it dispatches
// to). Every implementation's result is checked against zlib's first.
//
//   crc32_bench [--seconds-per-case S] [--rounds R]
//
// For each buffer size (4 KiB, 64 KiB, 1 MiB, 16 MiB warm in the caches; 256 MiB, larger than
// this machine's 32 MiB L3, so from memory) and each implementation, a round runs the
// function on the same buffer for about S seconds and prints GB/s (10^9 bytes per second); the
// rounds interleave the implementations so that a noisy neighbour hits all of them alike.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <isa-l/crc.h>
#include <zlib.h>
#ifdef Z2F_BENCH_HAVE_LIBDEFLATE
#include <libdeflate.h>
#endif

#include "common/crc32.hpp"

namespace {

struct Implementation {
    const char* name;
    std::function<std::uint32_t(const unsigned char*, std::size_t)> crc;
};

std::vector<Implementation> implementations() {
    std::vector<Implementation> list;
    list.push_back({"zlib crc32", [](const unsigned char* data, std::size_t size) {
                        return static_cast<std::uint32_t>(
                            ::crc32(0, data, static_cast<uInt>(size)));
                    }});
    list.push_back({"isa-l crc32_gzip_refl", [](const unsigned char* data, std::size_t size) {
                        return ::crc32_gzip_refl(0, data, size);
                    }});
#ifdef Z2F_BENCH_HAVE_LIBDEFLATE
    list.push_back({"libdeflate_crc32", [](const unsigned char* data, std::size_t size) {
                        return ::libdeflate_crc32(0, data, size);
                    }});
#endif
    list.push_back({"z2f::crc32_update", [](const unsigned char* data, std::size_t size) {
                        return z2f::crc32_update(
                            0, std::span(reinterpret_cast<const std::byte*>(data), size));
                    }});
    return list;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
    double seconds_per_case = 0.25;
    int rounds = 3;
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string flag = argv[i];
        if (flag == "--seconds-per-case") {
            seconds_per_case = std::atof(argv[i + 1]);
        } else if (flag == "--rounds") {
            rounds = std::atoi(argv[i + 1]);
        } else {
            std::fprintf(stderr, "usage: %s [--seconds-per-case S] [--rounds R]\n", argv[0]);
            return 2;
        }
    }
    const std::vector<std::size_t> sizes = {std::size_t{4} << 10, std::size_t{64} << 10,
                                            std::size_t{1} << 20, std::size_t{16} << 20,
                                            std::size_t{256} << 20};
    std::vector<unsigned char> buffer(sizes.back());
    std::mt19937_64 random(42);
    for (auto& byte : buffer) {
        byte = static_cast<unsigned char>(random());
    }
    auto list = implementations();
    // Same results as zlib everywhere, or the figures mean nothing.
    for (std::size_t size :
         {std::size_t{0}, std::size_t{1}, std::size_t{15}, std::size_t{4097}, sizes.back()}) {
        std::uint32_t expected = list[0].crc(buffer.data() + 1, size);
        for (const auto& implementation : list) {
            if (implementation.crc(buffer.data() + 1, size) != expected) {
                std::fprintf(stderr, "%s disagrees with zlib at size %zu\n", implementation.name,
                             size);
                return 1;
            }
        }
    }
    std::printf("%-24s %10s %6s %8s\n", "implementation", "buffer", "round", "GB/s");
    volatile std::uint32_t sink = 0;  // keeps every call alive
    for (std::size_t size : sizes) {
        for (int round = 1; round <= rounds; ++round) {
            for (const auto& implementation : list) {
                // Warm up (the buffer into the cache, the dispatcher's choice).
                sink = sink + implementation.crc(buffer.data(), size);
                std::uint64_t bytes = 0;
                auto start = std::chrono::steady_clock::now();
                double elapsed = 0;
                do {
                    for (int i = 0; i < 16; ++i) {
                        sink = sink + implementation.crc(buffer.data(), size);
                    }
                    bytes += 16 * size;
                    elapsed = seconds_since(start);
                } while (elapsed < seconds_per_case);
                std::printf("%-24s %9zuK %6d %8.2f\n", implementation.name, size >> 10, round,
                            static_cast<double>(bytes) / elapsed / 1e9);
            }
        }
    }
    std::printf("# sum of all results: %08x\n", static_cast<unsigned>(sink));
    return 0;
}
