// DirectWriter: byte identity with a plain buffered write for sizes around the block and the
// alignment, ranges of a shared file, the memory budget, buffered fallbacks (tmpfs, O_DIRECT
// refused on the first write), errors of requests in flight, and destruction mid-stream.
// Files live under $TMPDIR (ext4 here, where O_DIRECT works) unless a test says otherwise. The
// last test also reads through DirectReader: a ramfs mount is set up once for both.
#include "io/direct_writer.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <optional>
#include <random>
#include <sched.h>
#include <string>
#include <unistd.h>
#include <vector>

#include <gtest/gtest.h>
#include <sys/mount.h>

#include "io/async_io.hpp"
#include "io/direct_reader.hpp"
#include "io/posix_file.hpp"
#include "support/faulty_async_io.hpp"
#include "support/test_files.hpp"
#include "zero2fp32/error.hpp"

namespace z2f::io {
namespace {

using testing::FaultyAsyncIo;

constexpr std::size_t kKiB = 1024;
constexpr std::size_t kBlock = 64 * kKiB;  // small blocks: many of them in small files

std::vector<std::byte> random_bytes(std::size_t size, std::uint64_t seed) {
    std::mt19937_64 random(seed);
    std::vector<std::byte> bytes(size);
    for (auto& byte : bytes) {
        byte = static_cast<std::byte>(random() & 0xFF);
    }
    return bytes;
}

DirectWriterOptions small_blocks(IoEngine engine) {
    DirectWriterOptions options;
    options.engine = engine;
    options.block_size = kBlock;
    options.blocks_in_flight = 3;
    options.memory_budget = 3 * kBlock;
    return options;
}

// Appends `data` in pieces of `step` bytes (not a divisor of anything), as a copy loop would.
void append_in_pieces(DirectWriter& writer, std::span<const std::byte> data,
                      std::size_t step = 7777) {
    for (std::size_t at = 0; at < data.size(); at += step) {
        writer.append(data.subspan(at, std::min(step, data.size() - at)));
    }
}

class DirectWriterEngines : public ::testing::TestWithParam<IoEngine> {};

TEST_P(DirectWriterEngines, SizesAroundBlocksAndAlignmentMatchABufferedWrite) {
    testing::TempDir dir;
    for (std::size_t size : {std::size_t{0}, std::size_t{1}, std::size_t{4095}, std::size_t{4096},
                             std::size_t{4097}, kBlock - 1, kBlock, kBlock + 1, 3 * kBlock,
                             3 * kBlock + 4096, 3 * kBlock + 12345, std::size_t{1000003}}) {
        SCOPED_TRACE(size);
        const auto data = random_bytes(size, size);
        const std::string path = dir.file("out" + std::to_string(size));
        File::create_truncate(path).close();
        const IoCounters before = io_counters();
        DirectWriter writer(path, 0, size, small_blocks(GetParam()));
        EXPECT_TRUE(writer.direct());
        append_in_pieces(writer, data);
        EXPECT_EQ(writer.position(), size);
        EXPECT_TRUE(writer.buffer().empty());
        writer.finish();
        EXPECT_EQ(io_counters().bytes_written - before.bytes_written, size);

        // The reference: the same bytes through the plain buffered path.
        const std::string reference = dir.file("ref" + std::to_string(size));
        File plain = File::create_truncate(reference);
        plain.write_all(0, data);
        plain.close();
        EXPECT_EQ(file_size(path), size);
        EXPECT_EQ(testing::read_file_bytes(path), testing::read_file_bytes(reference));
    }
}

TEST_P(DirectWriterEngines, BufferAndCommitInUnevenSteps) {
    testing::TempDir dir;
    const std::size_t size = 5 * kBlock + 999;
    const auto data = random_bytes(size, 7);
    const std::string path = dir.file("out");
    DirectWriter writer(path, 0, size, small_blocks(GetParam()));
    std::size_t at = 0;
    std::size_t step = 1;
    while (at < size) {
        std::span<std::byte> space = writer.buffer();
        ASSERT_FALSE(space.empty());
        // Commit a prefix only: 1, 2, 4, ... bytes, then whatever is left of the block.
        const std::size_t piece = std::min({space.size(), size - at, step});
        std::memcpy(space.data(), data.data() + at, piece);
        writer.commit(piece);
        at += piece;
        step = step * 2 + 1;
    }
    writer.finish();
    EXPECT_EQ(testing::read_file_bytes(path), data);
}

TEST_P(DirectWriterEngines, RangesOfASharedFileDoNotTouchEachOther) {
    // Three writers share one file: two ranges ending on 4096-byte boundaries, the last one at
    // the file's unaligned end. The end's owner finishes first (its padding and truncation
    // must not disturb the others, still writing), all run at the same time.
    testing::TempDir dir;
    const std::string path = dir.file("shared");
    File::create_truncate(path).close();
    const std::uint64_t first_end = 2 * kBlock + 8192;
    const std::uint64_t second_end = first_end + 5 * 4096;
    const std::uint64_t size = second_end + kBlock + 777;
    const auto data = random_bytes(size, 11);
    const std::span<const std::byte> all(data);
    DirectWriter first(path, 0, first_end, small_blocks(GetParam()));
    DirectWriter second(path, first_end, second_end, small_blocks(GetParam()));
    DirectWriter last(path, second_end, size, small_blocks(GetParam()));
    append_in_pieces(first, all.subspan(0, first_end / 2));
    append_in_pieces(last, all.subspan(second_end));
    last.finish();
    append_in_pieces(second, all.subspan(first_end, second_end - first_end));
    append_in_pieces(first, all.subspan(first_end / 2, first_end - first_end / 2));
    second.finish();
    first.finish();
    EXPECT_EQ(file_size(path), size);
    EXPECT_EQ(testing::read_file_bytes(path), data);
}

TEST_P(DirectWriterEngines, DestructionMidStreamReturnsAndLeavesNothingRunning) {
    testing::TempDir dir;
    const auto data = random_bytes(20 * kBlock, 3);
    for (std::size_t written : {std::size_t{0}, std::size_t{100}, 10 * kBlock + 5}) {
        DirectWriter writer(dir.file("out"), 0, data.size(), small_blocks(GetParam()));
        writer.append(std::span(data).first(written));
    }  // no finish(): the destructor waits for what is in flight, never throws
    // The file is usable (and rewritable) afterwards.
    DirectWriter again(dir.file("out"), 0, data.size(), small_blocks(GetParam()));
    again.append(data);
    again.finish();
    EXPECT_EQ(testing::read_file_bytes(dir.file("out")), data);
}

TEST_P(DirectWriterEngines, OneBlockBudgetStillWrites) {
    testing::TempDir dir;
    DirectWriterOptions options = small_blocks(GetParam());
    options.block_size = 4 * kBlock;
    options.memory_budget = kBlock;  // smaller than one block: the block shrinks
    const auto data = random_bytes(3 * kBlock + 5, 5);
    DirectWriter writer(dir.file("out"), 0, data.size(), options);
    EXPECT_EQ(writer.block_size(), kBlock);
    EXPECT_EQ(writer.block_count(), 1u);
    append_in_pieces(writer, data);
    writer.finish();
    EXPECT_EQ(testing::read_file_bytes(dir.file("out")), data);
}

TEST_P(DirectWriterEngines, RangeAfterRangeOnOneWriterEachDurableOnce) {
    // Many files of every size around the block and the alignment, one after another on one
    // writer, as a rank writes a universal checkpoint's thousands of files: each is reported on
    // disk once, by its tag, and holds exactly its bytes. A stale longer file is cut to size.
    testing::TempDir dir;
    const std::vector<std::size_t> sizes = {0,      1,          4095,       4096,    4097,
                                            kBlock, kBlock + 1, 3 * kBlock, 1000003, 77};
    DirectWriterOptions options = small_blocks(GetParam());
    options.sync_slots = 2;
    options.max_open_ranges = 3;
    DirectWriter writer(options);
    std::vector<std::uint64_t> durable;
    for (std::size_t i = 0; i < sizes.size(); ++i) {
        const std::string path = dir.file("f" + std::to_string(i));
        if (i % 3 == 0) {
            testing::write_file_bytes(path, random_bytes(sizes[i] + 9000, 99));  // stale, longer
        }
        writer.open(path, 0, sizes[i], sizes[i], 100 + i);
        append_in_pieces(writer, random_bytes(sizes[i], i));
        writer.close_range();
        for (std::uint64_t tag : writer.take_durable())
            durable.push_back(tag);
    }
    writer.drain();
    for (std::uint64_t tag : writer.take_durable())
        durable.push_back(tag);
    std::sort(durable.begin(), durable.end());
    std::vector<std::uint64_t> expected(sizes.size());
    std::iota(expected.begin(), expected.end(), 100);
    EXPECT_EQ(durable, expected);
    for (std::size_t i = 0; i < sizes.size(); ++i) {
        EXPECT_EQ(testing::read_file_bytes(dir.file("f" + std::to_string(i))),
                  random_bytes(sizes[i], i))
            << sizes[i];
    }
}

TEST_P(DirectWriterEngines, SizeAndSyncSetsTheSizeOrGivesBackTheFailure) {
    // The engines' kSizeAndSync (the io_uring one runs the ftruncate in submit()): the size is
    // set, and a refused ftruncate (a read-only descriptor) is the request's completion.
    testing::TempDir dir;
    const std::string path = dir.file("sized");
    testing::write_file_bytes(path, random_bytes(3 * kBlock, 5));
    std::unique_ptr<AsyncIo> io = make_async_io(GetParam(), 2);
    const auto size_and_sync = [&](const File& file, std::uint64_t size, std::uint64_t tag) {
        io->submit({&file, IoDirection::kSizeAndSync, nullptr, 0, size, tag});
        const IoCompletion completion = io->wait_one();
        EXPECT_EQ(completion.tag, tag);
        return completion.result;
    };
    EXPECT_EQ(size_and_sync(File::open_write(path), 12345, 7), 0);
    EXPECT_EQ(File::open_read(path).size(), 12345u);
    EXPECT_LT(size_and_sync(File::open_read(path), 100, 8), 0);
    EXPECT_EQ(File::open_read(path).size(), 12345u);
}

INSTANTIATE_TEST_SUITE_P(, DirectWriterEngines,
                         ::testing::Values(IoEngine::kIoUring, IoEngine::kThreads),
                         [](const auto& test) { return std::string(io_engine_name(test.param)); });

TEST(DirectWriter, BlocksInFlightTimesBlockSizeStaysWithinTheBudget) {
    testing::TempDir dir;
    DirectWriterOptions options;
    options.block_size = std::size_t{4} << 20;
    options.blocks_in_flight = 8;
    options.memory_budget = std::size_t{16} << 20;
    DirectWriter writer(dir.file("out"), 0, 1, options);
    EXPECT_EQ(writer.block_size(), std::size_t{4} << 20);
    EXPECT_EQ(writer.block_count(), 4u);
    EXPECT_LE(writer.block_count() * writer.block_size(), options.memory_budget);
    options.block_size = 1000;  // rounded to whole pages
    DirectWriter small(dir.file("small"), 0, 1, options);
    EXPECT_EQ(small.block_size(), 4096u);
    EXPECT_EQ(small.block_count(), 8u);
}

TEST(DirectWriter, AlignmentComesFromTheFileSystemAndIsAtLeastAPage) {
    testing::TempDir dir;
    DirectWriter writer(dir.file("out"), 0, 10);
    EXPECT_GE(writer.alignment(), 4096u);
    EXPECT_EQ(writer.alignment() % 4096, 0u);
    writer.append(as_bytes(std::span("0123456789", 10)));
    writer.finish();
    EXPECT_EQ(file_size(dir.file("out")), 10u);
}

TEST(DirectWriter, WithoutPreallocationAndBufferedGiveTheSameBytes) {
    testing::TempDir dir;
    const auto data = random_bytes(4 * kBlock + 321, 9);
    for (bool direct : {true, false}) {
        for (bool preallocate : {true, false}) {
            DirectWriterOptions options = small_blocks(IoEngine::kIoUring);
            options.direct = direct;
            options.preallocate = preallocate;
            const std::string path =
                dir.file("out" + std::to_string(direct) + std::to_string(preallocate));
            DirectWriter writer(path, 0, data.size(), options);
            EXPECT_EQ(writer.direct(), direct);
            if (!direct) {
                EXPECT_EQ(writer.engine(), IoEngine::kThreads);  // buffered: never io_uring
            }
            append_in_pieces(writer, data);
            writer.finish();
            EXPECT_EQ(testing::read_file_bytes(path), data) << direct << preallocate;
        }
    }
}

TEST(DirectWriter, TmpfsGetsTheSameBytesDirectOrNot) {
    // /dev/shm is tmpfs: before Linux 6.6 it refuses O_DIRECT at open (EINVAL) and the writer
    // goes buffered; from 6.6 on it accepts O_DIRECT. Either way the bytes must be right.
    if (!is_directory("/dev/shm") || !is_writable_directory("/dev/shm")) {
        GTEST_SKIP() << "no writable /dev/shm";
    }
    const std::string path = "/dev/shm/z2f-direct-writer-test-" + std::to_string(::getpid());
    const auto data = random_bytes(3 * kBlock + 17, 13);
    {
        DirectWriter writer(path, 0, data.size(), small_blocks(IoEngine::kIoUring));
        append_in_pieces(writer, data);
        writer.finish();
        std::printf("tmpfs: %s\n", writer.direct() ? "O_DIRECT accepted" : "buffered fallback");
    }
    EXPECT_EQ(testing::read_file_bytes(path), data);
    remove_file(path);
}

TEST(DirectWriter, DirectRefusedOnTheFirstWritesFallsBackToBufferedWithTheSameBytes) {
    // O_DIRECT accepted at open but every transfer refused with EINVAL (some FUSE and NFS
    // mounts): all the blocks in flight fail, the writer turns O_DIRECT off and resends them
    // unpadded; the unaligned end must come out at its real size.
    for (IoEngine engine : {IoEngine::kIoUring, IoEngine::kThreads}) {
        testing::TempDir dir;
        const auto data = random_bytes(7 * kBlock + 4321, 17);
        DirectWriter writer(dir.file("out"), 0, data.size(), small_blocks(engine),
                            FaultyAsyncIo::failing_first(engine, 3, 3, EINVAL));
        EXPECT_TRUE(writer.direct());
        append_in_pieces(writer, data);
        EXPECT_FALSE(writer.direct());
        writer.finish();
        EXPECT_EQ(file_size(dir.file("out")), data.size());
        EXPECT_EQ(testing::read_file_bytes(dir.file("out")), data) << io_engine_name(engine);
    }
}

TEST(DirectWriter, EinvalAfterASuccessfulDirectWriteIsAnError) {
    testing::TempDir dir;
    const auto data = random_bytes(6 * kBlock, 19);
    std::vector<FaultyAsyncIo::Rule> rules = {{4, FaultyAsyncIo::Fault::kFail, EINVAL, 0}};
    DirectWriter writer(
        dir.file("out"), 0, data.size(), small_blocks(IoEngine::kThreads),
        std::make_unique<FaultyAsyncIo>(make_async_io(IoEngine::kThreads, 3), rules));
    EXPECT_THROW(
        {
            append_in_pieces(writer, data);
            writer.finish();
        },
        Error);
}

// Appends everything and finishes; returns the error's message ("" if none).
std::string write_expecting_error(DirectWriter& writer, std::span<const std::byte> data) {
    try {
        append_in_pieces(writer, data);
        writer.finish();
    } catch (const Error& error) {
        EXPECT_EQ(error.kind(), ErrorKind::kIo);
        return error.what();
    }
    return "";
}

TEST(DirectWriter, AnErrorOfARequestInFlightSurfacesWithPathAndOffset) {
    for (int errnum : {EIO, ENOSPC}) {
        for (IoEngine engine : {IoEngine::kIoUring, IoEngine::kThreads}) {
            testing::TempDir dir;
            const auto data = random_bytes(10 * kBlock, 23);
            // Request 2 is the third block: offset 2 * kBlock.
            std::vector<FaultyAsyncIo::Rule> rules = {{2, FaultyAsyncIo::Fault::kFail, errnum, 0}};
            DirectWriter writer(dir.file("out"), 0, data.size(), small_blocks(engine),
                                std::make_unique<FaultyAsyncIo>(make_async_io(engine, 3), rules));
            const std::string message = write_expecting_error(writer, data);
            EXPECT_NE(message.find(dir.file("out")), std::string::npos) << message;
            EXPECT_NE(message.find(std::strerror(errnum)), std::string::npos) << message;
            EXPECT_NE(message.find("offset " + std::to_string(2 * kBlock)), std::string::npos)
                << message;
            // Later calls keep reporting it.
            EXPECT_THROW(writer.finish(), Error);
        }
    }
}

TEST(DirectWriter, AnErrorInTheLastBlockSurfacesAtFinish) {
    testing::TempDir dir;
    const auto data = random_bytes(2 * kBlock + 100, 29);
    // Three blocks, three in flight: no wait before finish(); the last one fails.
    std::vector<FaultyAsyncIo::Rule> rules = {{2, FaultyAsyncIo::Fault::kFail, EIO, 0}};
    DirectWriter writer(
        dir.file("out"), 0, data.size(), small_blocks(IoEngine::kIoUring),
        std::make_unique<FaultyAsyncIo>(make_async_io(IoEngine::kIoUring, 3), rules));
    writer.append(data);
    EXPECT_THROW(writer.finish(), Error);
}

TEST(DirectWriter, ShortWritesAreCompletedAndAWriteOfNothingIsAnError) {
    testing::TempDir dir;
    const auto data = random_bytes(6 * kBlock + 10, 31);
    {
        std::vector<FaultyAsyncIo::Rule> rules = {{1, FaultyAsyncIo::Fault::kShort, 0, 8192},
                                                  {2, FaultyAsyncIo::Fault::kShort, 0, 4096}};
        DirectWriter writer(
            dir.file("short"), 0, data.size(), small_blocks(IoEngine::kThreads),
            std::make_unique<FaultyAsyncIo>(make_async_io(IoEngine::kThreads, 3), rules));
        append_in_pieces(writer, data);
        writer.finish();
        EXPECT_EQ(testing::read_file_bytes(dir.file("short")), data);
    }
    {
        std::vector<FaultyAsyncIo::Rule> rules = {{3, FaultyAsyncIo::Fault::kZero, 0, 0}};
        DirectWriter writer(
            dir.file("zero"), 0, data.size(), small_blocks(IoEngine::kThreads),
            std::make_unique<FaultyAsyncIo>(make_async_io(IoEngine::kThreads, 3), rules));
        const std::string message = write_expecting_error(writer, data);
        EXPECT_NE(message.find(std::strerror(EIO)), std::string::npos) << message;
    }
}

TEST(DirectWriter, AFailedSyncIsAnErrorAndTheRangeIsNotDurable) {
    testing::TempDir dir;
    const auto data = random_bytes(2 * kBlock, 47);
    // Three blocks and two sync slots: requests 0 and 1 write, request 2 is the fdatasync (a
    // range that ends the file: its ftruncate and fdatasync in one request).
    for (const bool ends_file : {false, true}) {
        std::vector<FaultyAsyncIo::Rule> rules = {{2, FaultyAsyncIo::Fault::kFail, EIO, 0}};
        DirectWriter writer(
            small_blocks(IoEngine::kThreads),
            std::make_unique<FaultyAsyncIo>(make_async_io(IoEngine::kThreads, 5), rules));
        const std::optional<std::uint64_t> final_size =
            ends_file ? std::optional<std::uint64_t>(data.size()) : std::nullopt;
        writer.open(dir.file("out"), 0, data.size(), final_size, 7);
        writer.append(data);
        writer.close_range();
        try {
            writer.drain();
            ADD_FAILURE() << "no error";
        } catch (const Error& error) {
            const std::string expected =
                ends_file ? "cannot set the size of or sync" : "cannot sync";
            EXPECT_NE(std::string(error.what()).find(expected), std::string::npos) << error.what();
            EXPECT_NE(std::string(error.what()).find(dir.file("out")), std::string::npos);
        }
        EXPECT_THROW(writer.take_durable(), Error);
    }
}

// The failure that published a file of zeros: one block of a small range fails while the
// range's other blocks and later ranges complete. The failed range must never be reported
// durable (its file keeps its temp name); the ranges after the error may still be.
TEST(DirectWriter, ARangeWithAFailedBlockIsNeverDurable) {
    for (IoEngine engine : {IoEngine::kIoUring, IoEngine::kThreads}) {
        SCOPED_TRACE(io_engine_name(engine));
        testing::TempDir dir;
        const auto data = random_bytes(kBlock + 4096, 53);
        // Requests: range 0 is blocks 0 and 1 (request 1 fails), then its sync is never sent.
        std::vector<FaultyAsyncIo::Rule> rules = {{1, FaultyAsyncIo::Fault::kFail, EIO, 0}};
        DirectWriter writer(small_blocks(engine),
                            std::make_unique<FaultyAsyncIo>(make_async_io(engine, 7), rules));
        writer.open(dir.file("failed"), 0, data.size(), data.size(), 0);
        writer.append(data);
        std::vector<std::uint64_t> durable;
        try {
            writer.close_range();
            writer.drain();
            ADD_FAILURE() << "no error";
        } catch (const Error& error) {
            EXPECT_NE(std::string(error.what()).find(dir.file("failed")), std::string::npos);
        }
        durable = writer.settle();
        EXPECT_TRUE(std::find(durable.begin(), durable.end(), 0u) == durable.end())
            << "a range with a failed write was reported on disk";
    }
}

// O_DIRECT takes aligned offsets only: a short write that ends mid-unit is completed from the
// unit it ended in, and the file holds exactly the data.
TEST(DirectWriter, AShortWriteEndingMidUnitIsCompletedFromThatUnit) {
    for (IoEngine engine : {IoEngine::kIoUring, IoEngine::kThreads}) {
        SCOPED_TRACE(io_engine_name(engine));
        testing::TempDir dir;
        const auto data = random_bytes(3 * kBlock + 777, 59);
        // Block 0 reported written up to byte 100 (the rest goes again from 0), block 2 up to
        // byte 5000 (again from 4096), block 1 a real short transfer of 8192 bytes.
        std::vector<FaultyAsyncIo::Rule> rules = {{0, FaultyAsyncIo::Fault::kReportShort, 0, 100},
                                                  {1, FaultyAsyncIo::Fault::kShort, 0, 8192},
                                                  {2, FaultyAsyncIo::Fault::kReportShort, 0, 5000}};
        DirectWriter writer(dir.file("out"), 0, data.size(), small_blocks(engine),
                            std::make_unique<FaultyAsyncIo>(make_async_io(engine, 3), rules));
        append_in_pieces(writer, data);
        writer.finish();
        EXPECT_EQ(testing::read_file_bytes(dir.file("out")), data);
    }
}

// --verify's side of the writer: the same blocks compared with the file, never written.
TEST(DirectWriter, CompareModeFindsEveryDifferingRunAndWritesNothing) {
    for (const bool direct : {true, false}) {
        SCOPED_TRACE(direct ? "direct reads" : "buffered reads");
        testing::TempDir dir;
        const auto data = random_bytes(3 * kBlock + 777, 61);
        testing::write_file_bytes(dir.file("out"), data);
        DirectWriterOptions options = small_blocks(IoEngine::kThreads);
        options.compare = true;
        options.direct = direct;
        auto compare = [&](std::span<const std::byte> expected) {
            DirectWriter writer(options);
            writer.open(dir.file("out"), 0, expected.size(), expected.size(), 5);
            append_in_pieces(writer, expected);
            writer.finish();
            EXPECT_EQ(writer.take_durable(), (std::vector<std::uint64_t>{5}));
            return writer.take_mismatches();
        };
        EXPECT_TRUE(compare(data).empty());
        std::vector<std::byte> changed = data;
        changed[kBlock + 10] ^= std::byte{1};
        changed[kBlock + 11] ^= std::byte{1};
        changed[3 * kBlock + 5] ^= std::byte{1};
        const std::vector<DirectWriter::Mismatch> found = compare(changed);
        ASSERT_EQ(found.size(), 2u);
        EXPECT_EQ(found[0].tag, 5u);
        EXPECT_EQ(found[0].begin, kBlock + 10);
        EXPECT_EQ(found[0].end, kBlock + 12);
        EXPECT_EQ(found[1].begin, 3 * kBlock + 5);
        // A file that ends too soon differs from its end on.
        std::vector<std::byte> longer = data;
        longer.resize(data.size() + 5000, std::byte{7});
        const std::vector<DirectWriter::Mismatch> beyond = compare(longer);
        ASSERT_FALSE(beyond.empty());
        EXPECT_EQ(beyond.back().begin, data.size());
        EXPECT_EQ(beyond.back().end, longer.size());
        EXPECT_EQ(testing::read_file_bytes(dir.file("out")), data);  // never written
    }
}

TEST(DirectWriter, DevFullReportsNoSpace) {
    // A real ENOSPC from the kernel (O_DIRECT or not, /dev/full refuses every write).
    DirectWriter writer("/dev/full", 0, 3 * kBlock, small_blocks(IoEngine::kIoUring));
    const auto data = random_bytes(3 * kBlock, 37);
    const std::string message = write_expecting_error(writer, data);
    EXPECT_NE(message.find("/dev/full"), std::string::npos) << message;
    EXPECT_NE(message.find(std::strerror(ENOSPC)), std::string::npos) << message;
}

TEST(DirectWriter, DestructionAfterAnErrorDoesNotHang) {
    testing::TempDir dir;
    const auto data = random_bytes(10 * kBlock, 41);
    std::vector<FaultyAsyncIo::Rule> rules = {{1, FaultyAsyncIo::Fault::kFail, EIO, 0}};
    DirectWriter writer(
        dir.file("out"), 0, data.size(), small_blocks(IoEngine::kIoUring),
        std::make_unique<FaultyAsyncIo>(make_async_io(IoEngine::kIoUring, 3), rules));
    EXPECT_THROW(append_in_pieces(writer, data), Error);
}  // destroyed with blocks possibly in flight

TEST(DirectWriter, MisuseIsRefused) {
    testing::TempDir dir;
    EXPECT_THROW(DirectWriter(dir.file("a"), 100, 5000), Error);   // unaligned begin
    EXPECT_THROW(DirectWriter(dir.file("b"), 8192, 4096), Error);  // end before begin
    EXPECT_THROW(DirectWriter(dir.file("no-such-dir/c"), 0, 10), Error);
    EXPECT_THROW(DirectWriter(dir.path(), 0, 10), Error);  // a directory
    DirectWriter writer(dir.file("d"), 0, 10);
    writer.append(as_bytes(std::span("01234", 5)));
    EXPECT_THROW(writer.finish(), Error);                                   // 5 bytes missing
    EXPECT_THROW(writer.append(as_bytes(std::span("0123456", 7))), Error);  // past the end
    EXPECT_THROW(writer.commit(100), Error);
}

}  // namespace
}  // namespace z2f::io

namespace z2f::io {
namespace {

// A file system that refuses O_DIRECT at open (EINVAL): ramfs, mounted in a private mount
// namespace of this test process (root only; skipped otherwise). On Linux 6.6+ tmpfs takes
// O_DIRECT, so this is the one place the open-time fallback of both the writer and the reader
// runs for real.
TEST(DirectIoFallback, RamfsRefusesODirectAtOpenAndGetsTheSameBytes) {
    testing::TempDir dir;
    const std::string mount_point = dir.file("ramfs");
    make_directories(mount_point);
    if (::geteuid() != 0 || ::unshare(CLONE_NEWNS) != 0 ||
        ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
        ::mount("z2f-test", mount_point.c_str(), "ramfs", 0, nullptr) != 0) {
        GTEST_SKIP() << "cannot mount a ramfs here (needs root): " << std::strerror(errno);
    }
    const std::string path = mount_point + "/out";
    ASSERT_FALSE(File::try_open_direct(path, DirectOpen::kWrite).has_value());
    const auto data = random_bytes(5 * kBlock + 3, 43);
    {
        DirectWriter writer(path, 0, data.size(), small_blocks(IoEngine::kIoUring));
        EXPECT_FALSE(writer.direct());
        EXPECT_EQ(writer.engine(), IoEngine::kThreads);
        append_in_pieces(writer, data);
        writer.finish();
    }
    EXPECT_EQ(testing::read_file_bytes(path), data);
    {
        DirectReaderOptions options;
        options.mode = ReadMode::kDirect;
        options.block_size = kBlock;
        DirectReader reader({path}, {{0, 1, data.size() - 1}}, options);
        std::vector<std::byte> got;
        while (auto piece = reader.next()) {
            got.insert(got.end(), piece->bytes.begin(), piece->bytes.end());
        }
        EXPECT_TRUE(std::equal(got.begin(), got.end(), data.begin() + 1, data.end()));
    }
    remove_file(path);
    ::umount2(mount_point.c_str(), MNT_DETACH);
}

}  // namespace
}  // namespace z2f::io
