// Times one DirectWriter or DirectReader run; bench/io_engine.sh calls it in interleaved rounds
// next to fio and dd. One line of key=value results per run on stdout.
//
//   io_engine_bench write PATH BYTES [options]    creates/truncates PATH, writes BYTES
//   io_engine_bench read PATH... [options]        reads every PATH whole
//
//   --engine io_uring|threads   (the default)  --block MIB (4)   --inflight N (4)
//   --budget MIB (64)           --buffered     (no O_DIRECT)     --no-prealloc (write)
//   --mode auto|direct|buffered (read, auto)   --extent BYTES    (read: ranges of this size,
//                                                                 one after the other)
//   --crc                       (read: CRC-32 of every byte delivered, printed)
//   --no-huge                   (blocks in 4 KiB pages, not transparent huge pages)
//   --buffered-uring            (write: buffered through io_uring, which DirectWriter never
//                                picks by itself: the measurement behind that choice)
//
// The written bytes: each 4 KiB page starts with its file offset (one store per page, so the
// figure is the I/O path's, not a fill loop's). Time runs from the writer's construction to
// the end of finish() (fdatasync included); for reads, from the reader's construction (warm
// sampling included) to the last piece.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include <sys/resource.h>

#include "common/crc32.hpp"
#include "io/direct_reader.hpp"
#include "io/direct_writer.hpp"
#include "io/posix_file.hpp"
#include "zero2fp32/error.hpp"

namespace {

using z2f::io::IoEngine;

constexpr std::size_t kMiB = std::size_t{1} << 20;

struct Arguments {
    std::string command;
    std::vector<std::string> positional;
    std::optional<IoEngine> engine;  // the writer's or reader's default when not given
    std::size_t block = 4 * kMiB;
    std::size_t inflight = 4;
    std::size_t budget = 64 * kMiB;
    bool buffered = false;
    bool preallocate = true;
    z2f::io::ReadMode mode = z2f::io::ReadMode::kAuto;
    std::uint64_t extent = 0;
    bool crc = false;
    bool huge_pages = true;
    bool buffered_uring = false;
};

[[noreturn]] void usage() {
    std::fprintf(
        stderr,
        "usage: io_engine_bench write PATH BYTES | read PATH... [--engine io_uring|threads]"
        " [--block MIB] [--inflight N] [--budget MIB] [--buffered] [--no-prealloc]"
        " [--mode auto|direct|buffered] [--extent BYTES] [--crc] [--no-huge]"
        " [--buffered-uring]\n");
    std::exit(2);
}

Arguments parse(int argc, char** argv) {
    if (argc < 2) {
        usage();
    }
    Arguments args;
    args.command = argv[1];
    for (int i = 2; i < argc; ++i) {
        std::string flag = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) {
                usage();
            }
            return argv[++i];
        };
        if (flag == "--engine") {
            std::string name = value();
            args.engine = name == "threads" ? IoEngine::kThreads : IoEngine::kIoUring;
        } else if (flag == "--block") {
            args.block = std::stoull(value()) * kMiB;
        } else if (flag == "--inflight") {
            args.inflight = std::stoull(value());
        } else if (flag == "--budget") {
            args.budget = std::stoull(value()) * kMiB;
        } else if (flag == "--buffered") {
            args.buffered = true;
        } else if (flag == "--no-prealloc") {
            args.preallocate = false;
        } else if (flag == "--mode") {
            std::string name = value();
            args.mode = name == "direct"     ? z2f::io::ReadMode::kDirect
                        : name == "buffered" ? z2f::io::ReadMode::kBuffered
                                             : z2f::io::ReadMode::kAuto;
        } else if (flag == "--extent") {
            args.extent = std::stoull(value());
        } else if (flag == "--buffered-uring") {
            args.buffered = true;
            args.buffered_uring = true;
        } else if (flag == "--no-huge") {
            args.huge_pages = false;
        } else if (flag == "--crc") {
            args.crc = true;
        } else if (flag.starts_with("--")) {
            usage();
        } else {
            args.positional.push_back(flag);
        }
    }
    return args;
}

double now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

// A field of /proc/self/<file> ("VmHWM:", "AnonHugePages:") in MiB. /proc files report size
// 0, so read_small_file would see nothing: plain stdio here.
std::string proc_mib(const char* file, const char* field) {
    std::FILE* status = std::fopen(file, "r");
    if (status == nullptr) {
        return "?";
    }
    char line[256];
    std::string result = "?";
    const std::size_t field_length = std::strlen(field);
    while (std::fgets(line, sizeof line, status) != nullptr) {
        if (std::strncmp(line, field, field_length) == 0) {
            result = std::to_string(std::strtoull(line + field_length, nullptr, 10) / 1024);
        }
    }
    std::fclose(status);
    return result;
}

// User + system CPU seconds of this process, its I/O threads included (io_uring's kernel
// workers are threads of the process too).
double cpu_seconds() {
    rusage usage{};
    ::getrusage(RUSAGE_SELF, &usage);
    auto seconds = [](const timeval& t) {
        return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
    };
    return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

std::string peak_rss_mib() {
    return proc_mib("/proc/self/status", "VmHWM:");
}

// Measured while the blocks still exist: how much of them the kernel gave huge pages.
std::string huge_mib() {
    return proc_mib("/proc/self/smaps_rollup", "AnonHugePages:");
}

int run_write(const Arguments& args) {
    if (args.positional.size() != 2) {
        usage();
    }
    const std::string& path = args.positional[0];
    const std::uint64_t bytes = std::stoull(args.positional[1]);
    z2f::io::File::create_truncate(path).close();
    z2f::io::DirectWriterOptions options;
    options.engine = args.engine.value_or(options.engine);
    options.block_size = args.block;
    options.blocks_in_flight = args.inflight;
    options.memory_budget = args.budget;
    options.direct = !args.buffered;
    options.preallocate = args.preallocate;
    options.huge_pages = args.huge_pages;
    const double start = now();
    const double cpu_start = cpu_seconds();
    z2f::io::DirectWriter writer(
        path, 0, bytes, options,
        args.buffered_uring ? z2f::io::make_async_io(IoEngine::kIoUring, args.inflight) : nullptr);
    std::uint64_t offset = 0;
    while (offset < bytes) {
        std::span<std::byte> space = writer.buffer();
        for (std::size_t page = 0; page < space.size(); page += 4096) {
            const std::uint64_t at = offset + page;
            std::memcpy(space.data() + page, &at, std::min<std::size_t>(8, space.size() - page));
        }
        writer.commit(space.size());
        offset += space.size();
    }
    const std::string huge = huge_mib();
    writer.finish();
    const double seconds = now() - start;
    const double cpu = cpu_seconds() - cpu_start;
    z2f::io::File check = z2f::io::File::open_read(path);
    std::printf(
        "write engine=%s block_mib=%zu inflight=%zu direct=%d prealloc=%d bytes=%llu "
        "seconds=%.3f gbps=%.3f cpu_s=%.3f peak_rss_mib=%s huge_mib=%s cached_after=%.3f "
        "size_ok=%d\n",
        z2f::io::io_engine_name(writer.engine()), writer.block_size() / kMiB, writer.block_count(),
        writer.direct() ? 1 : 0, args.preallocate ? 1 : 0, static_cast<unsigned long long>(bytes),
        seconds, static_cast<double>(bytes) / seconds / 1e9, cpu, peak_rss_mib().c_str(),
        huge.c_str(), check.cached_fraction(0, bytes), check.size() == bytes ? 1 : 0);
    return 0;
}

int run_read(const Arguments& args) {
    if (args.positional.empty()) {
        usage();
    }
    std::vector<z2f::io::ReadRange> ranges;
    std::uint64_t total = 0;
    for (std::uint32_t i = 0; i < args.positional.size(); ++i) {
        const std::uint64_t size = z2f::io::file_size(args.positional[i]);
        const std::uint64_t step = args.extent == 0 ? size : args.extent;
        for (std::uint64_t at = 0; at < size; at += step) {
            ranges.push_back({i, at, std::min(step, size - at)});
        }
        total += size;
    }
    z2f::io::DirectReaderOptions options;
    options.engine = args.engine.value_or(options.engine);
    options.block_size = args.block;
    options.blocks_in_flight = args.inflight;
    options.memory_budget = args.budget;
    options.mode = args.buffered ? z2f::io::ReadMode::kBuffered : args.mode;
    options.huge_pages = args.huge_pages;
    double sample_ms = -1;
    if (options.mode == z2f::io::ReadMode::kAuto) {
        // What the reader's warm/cold decision costs, measured apart (it samples again inside).
        const double sample_start = now();
        (void)z2f::io::sample_cached_fraction(args.positional, ranges, options.warm_samples);
        sample_ms = (now() - sample_start) * 1e3;
    }
    const double start = now();
    const double cpu_start = cpu_seconds();
    z2f::io::DirectReader reader(args.positional, std::move(ranges), options);
    std::uint64_t delivered = 0;
    std::uint32_t crc = 0;
    while (auto piece = reader.next()) {
        delivered += piece->bytes.size();
        if (args.crc) {
            crc = z2f::crc32_update(crc, piece->bytes);
        }
    }
    const double seconds = now() - start;
    const double cpu = cpu_seconds() - cpu_start;
    const std::string huge = huge_mib();
    std::printf(
        "read engine=%s block_mib=%zu inflight=%zu direct=%d sampled_cached=%.3f bytes=%llu "
        "seconds=%.3f gbps=%.3f cpu_s=%.3f sample_ms=%.3f peak_rss_mib=%s huge_mib=%s crc=%08x "
        "ok=%d\n",
        z2f::io::io_engine_name(reader.engine()), reader.block_size() / kMiB, reader.block_count(),
        reader.direct() ? 1 : 0, reader.sampled_cached_fraction(),
        static_cast<unsigned long long>(delivered), seconds,
        static_cast<double>(delivered) / seconds / 1e9, cpu, sample_ms, peak_rss_mib().c_str(),
        huge.c_str(), static_cast<unsigned>(crc), delivered == total ? 1 : 0);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        Arguments args = parse(argc, argv);
        if (args.command == "write") {
            return run_write(args);
        }
        if (args.command == "read") {
            return run_read(args);
        }
        usage();
    } catch (const std::exception& error) {
        std::fprintf(stderr, "io_engine_bench: %s\n", error.what());
        return 1;
    }
}
