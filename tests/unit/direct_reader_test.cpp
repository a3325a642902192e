// DirectReader: every range's bytes exactly, in order, for unaligned, empty, overlapping,
// backwards and block-spanning ranges over two files and random interleavings of up to six,
// direct and buffered, both engines; rows of interleaved files in large requests; the
// warm/cold sampling; truncated inputs, failed, refused and short reads; destruction
// mid-stream.
#include "io/direct_reader.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>
#include <string>
#include <unistd.h>
#include <vector>

#include <gtest/gtest.h>

#include "io/async_io.hpp"
#include "io/posix_file.hpp"
#include "support/faulty_async_io.hpp"
#include "support/test_files.hpp"
#include "zero2fp32/error.hpp"

namespace z2f::io {
namespace {

using testing::FaultyAsyncIo;

constexpr std::size_t kBlock = 64 * 1024;

std::vector<std::byte> random_bytes(std::size_t size, std::uint64_t seed) {
    std::mt19937_64 random(seed);
    std::vector<std::byte> bytes(size);
    for (auto& byte : bytes) {
        byte = static_cast<std::byte>(random() & 0xFF);
    }
    return bytes;
}

DirectReaderOptions small_blocks(IoEngine engine, ReadMode mode) {
    DirectReaderOptions options;
    options.engine = engine;
    options.mode = mode;
    options.block_size = kBlock;
    options.blocks_in_flight = 3;
    options.memory_budget = 3 * kBlock;
    return options;
}

// Two input files with known content, written and flushed out of the page cache.
struct Inputs {
    testing::TempDir dir;
    std::vector<std::string> paths;
    std::vector<std::vector<std::byte>> contents;

    explicit Inputs(std::vector<std::size_t> sizes) {
        for (std::size_t i = 0; i < sizes.size(); ++i) {
            paths.push_back(dir.file("input" + std::to_string(i)));
            contents.push_back(random_bytes(sizes[i], 100 + i));
            testing::write_file_bytes(paths.back(), contents.back());
        }
    }
    void make_cold() const {
        for (const auto& path : paths) {
            File file = File::open_read(path);
            File::open_write(path).sync();
            file.drop_cache(0, file.size());
        }
    }
    void make_warm() const {
        for (const auto& path : paths) {
            (void)testing::read_file_bytes(path);
        }
    }
    std::vector<std::byte> expected(const ReadRange& range) const {
        const auto& content = contents[range.file];
        return {content.begin() + static_cast<std::ptrdiff_t>(range.offset),
                content.begin() + static_cast<std::ptrdiff_t>(range.offset + range.length)};
    }
};

// Reads everything; checks the order of pieces and returns each range's bytes.
std::vector<std::vector<std::byte>> read_all(DirectReader& reader, std::size_t range_count) {
    std::vector<std::vector<std::byte>> got(range_count);
    std::size_t last_range = 0;
    while (auto piece = reader.next()) {
        EXPECT_GE(piece->range, last_range);
        EXPECT_FALSE(piece->bytes.empty());
        last_range = piece->range;
        auto& bytes = got.at(piece->range);
        EXPECT_EQ(piece->offset, bytes.size()) << "range " << piece->range;
        bytes.insert(bytes.end(), piece->bytes.begin(), piece->bytes.end());
    }
    EXPECT_FALSE(reader.next().has_value());  // stays finished
    return got;
}

std::vector<ReadRange> mixed_ranges(const Inputs& inputs) {
    const std::uint64_t size0 = inputs.contents[0].size();
    const std::uint64_t size1 = inputs.contents[1].size();
    std::vector<ReadRange> ranges = {
        {0, 0, 1},                    // one byte at the start
        {0, 1, 4094},                 // adjacent, unaligned both ends
        {0, 4095, 2},                 // straddles a page boundary
        {0, 10000, 0},                // empty: no piece
        {0, 10000, 3 * kBlock + 17},  // spans several blocks
        {1, 5, 1000},                 // another file
        {0, 12345, 100},              // back in the first file, behind: a new window
        {0, 12345, 100},              // the same bytes again
        {1, size1 - 1, 1},            // the last byte of a file
        {0, size0 - 70000, 70000},    // the unaligned end of a file
        {1, 0, size1},                // a whole file
    };
    std::mt19937_64 random(5);
    for (int i = 0; i < 200; ++i) {  // many small extents, mostly in order, as ZeRO-3 has
        const std::uint32_t file = static_cast<std::uint32_t>(random() % 2);
        const std::uint64_t size = file == 0 ? size0 : size1;
        const std::uint64_t offset = random() % size;
        ranges.push_back({file, offset, std::min<std::uint64_t>(random() % 9000, size - offset)});
    }
    return ranges;
}

struct ReaderCase {
    IoEngine engine;
    ReadMode mode;
};

class DirectReaderCases : public ::testing::TestWithParam<ReaderCase> {};

TEST_P(DirectReaderCases, EveryRangeExactlyAndInOrder) {
    Inputs inputs({3 * kBlock * 2 + 54321, 200001});
    inputs.make_cold();
    const auto ranges = mixed_ranges(inputs);
    const IoCounters before = io_counters();
    DirectReader reader(inputs.paths, ranges, small_blocks(GetParam().engine, GetParam().mode));
    EXPECT_EQ(reader.direct(), GetParam().mode == ReadMode::kDirect);
    const auto got = read_all(reader, ranges.size());
    std::uint64_t wanted = 0;
    for (std::size_t i = 0; i < ranges.size(); ++i) {
        EXPECT_EQ(got[i], inputs.expected(ranges[i])) << "range " << i;
        wanted += ranges[i].length;
    }
    EXPECT_GE(io_counters().bytes_read - before.bytes_read, wanted / 4);  // shared windows
}

TEST_P(DirectReaderCases, ContiguousExtentsAreReadOnceThroughSharedWindows) {
    Inputs inputs({10 * kBlock + 3, 10});
    std::vector<ReadRange> ranges;
    for (std::uint64_t at = 0; at < inputs.contents[0].size(); at += 1001) {
        ranges.push_back({0, at, std::min<std::uint64_t>(1001, inputs.contents[0].size() - at)});
    }
    const IoCounters before = io_counters();
    DirectReader reader(inputs.paths, ranges, small_blocks(GetParam().engine, GetParam().mode));
    const auto got = read_all(reader, ranges.size());
    for (std::size_t i = 0; i < ranges.size(); ++i) {
        ASSERT_EQ(got[i], inputs.expected(ranges[i])) << "range " << i;
    }
    // Every byte once, plus at most the alignment at the end.
    EXPECT_LE(io_counters().bytes_read - before.bytes_read, inputs.contents[0].size() + 4096);
}

TEST_P(DirectReaderCases, InterleavedFilesAreReadOnceToo) {
    // ZeRO-3's order: slice t of file 0, of file 1, of file 2, then slice t + 1 of each; the
    // slices of one file follow one another at unaligned offsets. The page a slice ends in is
    // not read again for the next slice of its file.
    Inputs inputs({3 * kBlock + 77, 3 * kBlock + 77, 3 * kBlock + 77});
    std::vector<ReadRange> ranges;
    const std::uint64_t slice = 1234;
    for (std::uint64_t at = 0; at < 3 * kBlock + 77; at += slice) {
        for (std::uint32_t file = 0; file < 3; ++file)
            ranges.push_back({file, at, std::min<std::uint64_t>(slice, 3 * kBlock + 77 - at)});
    }
    const IoCounters before = io_counters();
    DirectReader reader(inputs.paths, ranges, small_blocks(GetParam().engine, GetParam().mode));
    const auto got = read_all(reader, ranges.size());
    for (std::size_t i = 0; i < ranges.size(); ++i) {
        ASSERT_EQ(got[i], inputs.expected(ranges[i])) << "range " << i;
    }
    // Every byte once, plus at most the alignment at each file's end.
    EXPECT_LE(io_counters().bytes_read - before.bytes_read, 3 * (3 * kBlock + 77 + 4096));
}

TEST_P(DirectReaderCases, RowsOfInterleavedFilesAreReadInLargeRequests) {
    // A row-parallel weight: row r of TP shard 0, of shard 1, ..., then row r + 1 of each; a
    // shard's rows follow one another in its file. Windows planned in groups read many rows
    // of a file per request instead of one request per row.
    constexpr std::uint64_t kRow = 1000;
    constexpr std::uint64_t kRows = 400;
    const std::size_t shards = 4;
    Inputs inputs(std::vector<std::size_t>(shards, kRows * kRow + 33));
    inputs.make_cold();
    std::vector<ReadRange> ranges;
    for (std::uint64_t row = 0; row < kRows; ++row) {
        for (std::uint32_t shard = 0; shard < shards; ++shard)
            ranges.push_back({shard, 33 + row * kRow, kRow});
    }
    auto engine = std::make_unique<FaultyAsyncIo>(make_async_io(GetParam().engine, 16),
                                                  std::vector<FaultyAsyncIo::Rule>{});
    const FaultyAsyncIo& counting = *engine;
    const IoCounters before = io_counters();
    DirectReader reader(inputs.paths, ranges, small_blocks(GetParam().engine, GetParam().mode),
                        std::move(engine));
    const auto got = read_all(reader, ranges.size());
    for (std::size_t i = 0; i < ranges.size(); ++i) {
        ASSERT_EQ(got[i], inputs.expected(ranges[i])) << "range " << i;
    }
    // 1600 rows in at least 8 rows per request on average (one block of 64 KiB per four
    // files holds 16 rows of each), every byte once plus the alignment at each file's ends.
    EXPECT_LE(counting.submitted(), ranges.size() / 8) << counting.submitted() << " requests";
    EXPECT_LE(io_counters().bytes_read - before.bytes_read, shards * (kRows * kRow + 2 * 4096));
}

TEST_P(DirectReaderCases, RandomInterleavingsAreReadExactly) {
    // Runs of rows over several files, jumps forwards and backwards, empty and block-spanning
    // ranges, with blocks, budgets and engine depths from one slot per file to fewer slots
    // than files: every range exactly and in order.
    std::mt19937_64 random(GetParam().mode == ReadMode::kDirect ? 11 : 12);
    for (int round = 0; round < 12; ++round) {
        const std::size_t files = 1 + random() % 6;
        std::vector<std::size_t> sizes;
        for (std::size_t f = 0; f < files; ++f)
            sizes.push_back(1 + random() % 300000);
        Inputs inputs(sizes);
        std::vector<ReadRange> ranges;
        std::vector<std::uint64_t> cursor(files, 0);
        while (ranges.size() < 600) {
            const std::uint64_t row = random() % 5000;
            const std::size_t width = 1 + random() % files;  // files interleaved in this run
            const std::size_t first = random() % files;
            for (int r = 0, rows = 1 + static_cast<int>(random() % 40); r < rows; ++r) {
                for (std::size_t i = 0; i < width; ++i) {
                    const std::uint32_t f = static_cast<std::uint32_t>((first + i) % files);
                    const std::uint64_t at = std::min<std::uint64_t>(cursor[f], sizes[f]);
                    const std::uint64_t length = std::min<std::uint64_t>(row, sizes[f] - at);
                    ranges.push_back({f, at, length});
                    cursor[f] = at + length;
                }
            }
            switch (random() % 4) {  // then: on, a jump back, a jump ahead, a long range
                case 1: {
                    const std::size_t f = random() % files;
                    cursor[f] = random() % sizes[f];
                    break;
                }
                case 2: {
                    const std::size_t f = random() % files;
                    cursor[f] = std::min<std::uint64_t>(cursor[f] + random() % 100000, sizes[f]);
                    break;
                }
                case 3: {
                    const std::uint32_t f = static_cast<std::uint32_t>(random() % files);
                    const std::uint64_t at = random() % sizes[f];
                    ranges.push_back({f, at, sizes[f] - at});
                    break;
                }
                default:
                    break;
            }
        }
        if (GetParam().mode == ReadMode::kDirect)
            inputs.make_cold();
        DirectReaderOptions options = small_blocks(GetParam().engine, GetParam().mode);
        options.block_size = 4096 * (1 + random() % 16);
        options.blocks_in_flight = 1 + random() % 4;
        options.memory_budget = options.blocks_in_flight * options.block_size;
        options.unit_cache_bytes = random() % 2 == 0 ? 0 : 64 * 1024;
        const std::size_t depth = options.blocks_in_flight + random() % 12;
        DirectReader reader(inputs.paths, ranges, options, make_async_io(GetParam().engine, depth));
        const auto got = read_all(reader, ranges.size());
        for (std::size_t i = 0; i < ranges.size(); ++i) {
            ASSERT_EQ(got[i], inputs.expected(ranges[i]))
                << "round " << round << ", range " << i << " of file " << ranges[i].file;
        }
    }
}

TEST_P(DirectReaderCases, DestructionMidStream) {
    Inputs inputs({20 * kBlock, 10});
    std::vector<ReadRange> ranges = {{0, 3, 20 * kBlock - 3}};
    DirectReader reader(inputs.paths, ranges, small_blocks(GetParam().engine, GetParam().mode));
    auto piece = reader.next();
    ASSERT_TRUE(piece.has_value());
}  // destroyed with reads in flight

INSTANTIATE_TEST_SUITE_P(, DirectReaderCases,
                         ::testing::Values(ReaderCase{IoEngine::kIoUring, ReadMode::kDirect},
                                           ReaderCase{IoEngine::kThreads, ReadMode::kDirect},
                                           ReaderCase{IoEngine::kIoUring, ReadMode::kBuffered},
                                           ReaderCase{IoEngine::kThreads, ReadMode::kBuffered}),
                         [](const auto& test) {
                             return std::string(io_engine_name(test.param.engine)) +
                                    (test.param.mode == ReadMode::kDirect ? "_direct"
                                                                          : "_buffered");
                         });

TEST(DirectReader, AutoReadsBufferedWhenWarmAndDirectWhenCold) {
    Inputs inputs({40 * kBlock, 5 * kBlock});
    const std::vector<ReadRange> ranges = {{0, 0, 40 * kBlock}, {1, 100, 4 * kBlock}};
    inputs.make_cold();
    EXPECT_LT(sample_cached_fraction(inputs.paths, ranges, 32), 0.2);
    {
        DirectReader reader(inputs.paths, ranges,
                            small_blocks(IoEngine::kIoUring, ReadMode::kAuto));
        EXPECT_TRUE(reader.direct());
        EXPECT_LT(reader.sampled_cached_fraction(), 0.2);
        const auto got = read_all(reader, ranges.size());
        EXPECT_EQ(got[1], inputs.expected(ranges[1]));
    }
    inputs.make_warm();
    EXPECT_GT(sample_cached_fraction(inputs.paths, ranges, 32), 0.8);
    {
        DirectReader reader(inputs.paths, ranges,
                            small_blocks(IoEngine::kIoUring, ReadMode::kAuto));
        EXPECT_FALSE(reader.direct());
        EXPECT_GT(reader.sampled_cached_fraction(), 0.8);
        const auto got = read_all(reader, ranges.size());
        EXPECT_EQ(got[0], inputs.expected(ranges[0]));
    }
    EXPECT_EQ(sample_cached_fraction(inputs.paths, {}, 32), 0.0);
}

TEST(DirectReader, MemoryStaysWithinTheBudget) {
    Inputs inputs({10, 10});
    DirectReaderOptions options;
    options.block_size = std::size_t{4} << 20;
    options.blocks_in_flight = 8;
    options.memory_budget = std::size_t{16} << 20;
    DirectReader reader(inputs.paths, {}, options);
    EXPECT_EQ(reader.block_count(), 4u);
    options.memory_budget = std::size_t{1} << 20;
    DirectReader small(inputs.paths, {}, options);
    EXPECT_EQ(small.block_count(), 1u);
    EXPECT_EQ(small.block_size(), std::size_t{1} << 20);
    EXPECT_FALSE(small.next().has_value());
}

TEST(DirectReader, RangePastTheEndIsATruncatedInput) {
    for (ReadMode mode : {ReadMode::kDirect, ReadMode::kBuffered}) {
        Inputs inputs({100000, 10});
        const std::vector<ReadRange> ranges = {{0, 0, 1000}, {0, 99000, 2000}};
        DirectReader reader(inputs.paths, ranges, small_blocks(IoEngine::kIoUring, mode));
        try {
            while (reader.next()) {
            }
            ADD_FAILURE() << "no error";
        } catch (const Error& error) {
            EXPECT_EQ(error.kind(), ErrorKind::kInput);
            EXPECT_NE(std::string(error.what()).find("truncated"), std::string::npos);
            EXPECT_NE(std::string(error.what()).find(inputs.paths[0]), std::string::npos);
        }
    }
}

TEST(DirectReader, AFailedReadSurfacesWithPathAndOffset) {
    for (IoEngine engine : {IoEngine::kIoUring, IoEngine::kThreads}) {
        Inputs inputs({10 * kBlock, 10});
        const std::vector<ReadRange> ranges = {{0, 0, 10 * kBlock}};
        std::vector<FaultyAsyncIo::Rule> rules = {{2, FaultyAsyncIo::Fault::kFail, EIO, 0}};
        DirectReader reader(inputs.paths, ranges, small_blocks(engine, ReadMode::kDirect),
                            std::make_unique<FaultyAsyncIo>(make_async_io(engine, 3), rules));
        try {
            while (reader.next()) {
            }
            ADD_FAILURE() << "no error";
        } catch (const Error& error) {
            EXPECT_EQ(error.kind(), ErrorKind::kIo);
            const std::string message = error.what();
            EXPECT_NE(message.find(inputs.paths[0]), std::string::npos) << message;
            EXPECT_NE(message.find(std::strerror(EIO)), std::string::npos) << message;
            EXPECT_NE(message.find("offset " + std::to_string(2 * kBlock)), std::string::npos)
                << message;
        }
    }
}

TEST(DirectReader, DirectRefusedOnTheFirstReadFallsBackAndShortReadsAreCompleted) {
    Inputs inputs({10 * kBlock + 7, 10});
    const std::vector<ReadRange> ranges = {{0, 1, 10 * kBlock + 5}};
    std::vector<FaultyAsyncIo::Rule> rules = {{0, FaultyAsyncIo::Fault::kFail, EINVAL, 0},
                                              {4, FaultyAsyncIo::Fault::kShort, 0, 4096},
                                              {6, FaultyAsyncIo::Fault::kShort, 0, 100}};
    DirectReader reader(
        inputs.paths, ranges, small_blocks(IoEngine::kIoUring, ReadMode::kDirect),
        std::make_unique<FaultyAsyncIo>(make_async_io(IoEngine::kIoUring, 3), rules));
    const auto got = read_all(reader, ranges.size());
    EXPECT_EQ(got[0], inputs.expected(ranges[0]));
}

TEST(DirectReader, TmpfsInputsReadTheSameBytes) {
    if (!is_writable_directory("/dev/shm")) {
        GTEST_SKIP() << "no writable /dev/shm";
    }
    const std::string path = "/dev/shm/z2f-direct-reader-test-" + std::to_string(::getpid());
    const auto content = random_bytes(3 * kBlock + 99, 3);
    testing::write_file_bytes(path, content);
    const std::vector<ReadRange> ranges = {{0, 7, content.size() - 7}};
    {
        DirectReader reader({path}, ranges, small_blocks(IoEngine::kIoUring, ReadMode::kDirect));
        const auto got = read_all(reader, 1);
        EXPECT_TRUE(std::equal(got[0].begin(), got[0].end(), content.begin() + 7, content.end()));
    }
    remove_file(path);
}

TEST(DirectReader, ARangeNamingNoFileIsRefused) {
    Inputs inputs({10, 10});
    EXPECT_THROW(DirectReader(inputs.paths, {{2, 0, 1}}), Error);
    EXPECT_THROW(
        {
            DirectReader reader({inputs.dir.file("missing")}, {{0, 0, 1}},
                                small_blocks(IoEngine::kIoUring, ReadMode::kDirect));
            reader.next();
        },
        Error);
}

}  // namespace
}  // namespace z2f::io
