// WriteBehind: the helper thread that pushes a rank's output to disk and out of the page cache.
// It only issues advisory calls on ranges it is told about, so the tests report large ranges of
// small or sparse files and check the protocol: windows retire, finish() returns, errors of the
// helper reach the writer, abandon() leaves it ready for the next file.
#include "io/write_behind.hpp"

#include <chrono>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "common/errors.hpp"
#include "io/posix_file.hpp"
#include "support/test_files.hpp"

namespace z2f::io {
namespace {

constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;

// Reports [0, bytes) in pieces of `step`, as the copy loop does.
void report(WriteBehind& behind, std::uint64_t bytes, std::uint64_t step = kMiB) {
    for (std::uint64_t offset = 0; offset < bytes; offset += step) {
        behind.written(offset, std::min(step, bytes - offset));
    }
}

TEST(WriteBehind, RetiresManyWindowsAndFinishesFileAfterFile) {
    testing::TempDir dir;
    WriteBehind behind;
    for (int round = 0; round < 2; ++round) {
        File file = File::open_write(dir.file("out" + std::to_string(round)));
        // Sparse: write-back of holes is a no-op, but every step of the protocol still runs,
        // including the periodic fdatasync after kSyncBytes.
        const std::uint64_t size = WriteBehind::kSyncBytes + 5 * WriteBehind::kWindowBytes + 123;
        file.truncate(size);
        file.write_all(size - 3, std::as_bytes(std::span("ab", 2)));
        behind.start(file);
        report(behind, size);
        behind.finish();
        file.close();
    }
}

TEST(WriteBehind, WritesStraddlingWindowsAndASmallFileFinish) {
    testing::TempDir dir;
    File file = File::open_write(dir.file("out"));
    file.truncate(4 * WriteBehind::kWindowBytes);
    WriteBehind behind;
    behind.start(file);
    // A single report larger than the byte bound must not block the writer forever.
    behind.written(0, 4 * WriteBehind::kWindowBytes);
    behind.finish();
    behind.start(file);
    behind.written(0, 10);
    behind.finish();
}

TEST(WriteBehind, HelperErrorsReachTheWriterAndNameTheFile) {
    // fdatasync on a character device fails (EINVAL). The helper syncs once kSyncBytes are
    // retired and it has nothing else to do, so the writer pauses between windows to give it
    // that moment; the error must surface at a later report (or at finish()).
    File device = File::open_write("/dev/full");
    WriteBehind behind;
    behind.start(device);
    std::string message;
    try {
        for (std::uint64_t offset = 0; offset < 64 * WriteBehind::kWindowBytes;
             offset += WriteBehind::kWindowBytes) {
            behind.written(offset, WriteBehind::kWindowBytes);
            if (offset >= WriteBehind::kSyncBytes) {
                std::this_thread::sleep_for(std::chrono::milliseconds(5));
            }
        }
        behind.finish();
    } catch (const Error& error) {
        message = error.what();
    }
    EXPECT_NE(message.find("/dev/full"), std::string::npos) << "error: '" << message << "'";
    // Usable again afterwards.
    testing::TempDir dir;
    File file = File::open_write(dir.file("next"));
    behind.start(file);
    behind.written(0, 100);
    behind.finish();
}

TEST(WriteBehind, AbandonDropsPendingWork) {
    testing::TempDir dir;
    File file = File::open_write(dir.file("out"));
    file.truncate(3 * WriteBehind::kWindowBytes);
    WriteBehind behind;
    behind.start(file);
    report(behind, 3 * WriteBehind::kWindowBytes);
    behind.abandon();
    behind.abandon();  // idempotent
    behind.start(file);
    behind.written(0, 1);
    behind.finish();
}

TEST(WriteBehind, InputDropsRunOnTheHelperAndOutliveTheInput) {
    testing::TempDir dir;
    testing::write_file_bytes(dir.file("input"), std::vector<std::byte>(1 << 16));
    WriteBehind behind;
    {
        File input = File::open_read(dir.file("input"));
        behind.drop_later(input, 0, 4096);  // no helper yet: dropped right here
        File output = File::open_write(dir.file("out"));
        behind.start(output);
        // More than the queue holds: the overflow is dropped inline.
        for (std::size_t i = 0; i < 2 * WriteBehind::kMaxQueuedDrops; ++i) {
            behind.drop_later(input, (i % 16) * 4096, 4096);
        }
        behind.written(0, 10);
        behind.finish();
    }  // the input is closed while its drops may still be queued: they use their own descriptor
}

}  // namespace
}  // namespace z2f::io
