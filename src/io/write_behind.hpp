// Write-behind for one output file at a time: pushes written bytes to the storage and out of
// the page cache on a helper thread, while the copy loop keeps reading and writing.
//
// The copy loop reports each write with `written()`. Bytes are grouped into windows of
// kWindowBytes; the helper starts write-back of each full window (sync_file_range), keeps a few
// windows in flight, and retires the oldest: waits until it is on disk, then drops it from the
// page cache. Every kSyncBytes retired, it also calls fdatasync, so that the storage's own
// durability work (a disk cache flush, a host flushing a virtual disk, a parallel file
// system's commit) runs while the copy goes on instead of all of it in the final fsync.
//
// Why a helper thread: starting write-back, waiting for it and dropping pages cost CPU and
// latency that, in the copy loop, came on top of every byte copied; on a second core they
// overlap with it. Why bounded: Slurm charges page cache to the job's memory limit, and a rank
// must not hold more than about kMaxPendingBytes + kWindowBytes of its output in the cache, so
// `written()` blocks while that much is waiting for the helper.
//
// The same thread also drops the input ranges the copy has read (`drop_later`): each drop has a
// fixed cost of a fraction of a millisecond (the kernel drains every CPU's page lists), and
// ZeRO-3 inputs are read in many small extents; in the copy loop those drops took a tenth of a
// 200M-parameter conversion. The helper works on its own duplicate of the input's descriptor,
// so the input may be closed meanwhile.
//
// The file must stay open until `finish()` or `abandon()` has returned. Errors of the helper
// (EIO, ENOSPC from write-back or fdatasync) are rethrown by the next `written()` or
// `finish()` in the calling thread. The helper never calls MPI and blocks every signal, so
// SIGTERM/SIGINT keep reaching the threads that check for them.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

#include "io/posix_file.hpp"

namespace z2f::io {

class WriteBehind {
  public:
    // Write-back unit. Large enough for big sequential device requests, small enough to
    // keep the cache footprint and the time to retire one window short.
    static constexpr std::uint64_t kWindowBytes = std::uint64_t{32} << 20;
    // Windows under write-back before the oldest is waited for and dropped. Measured on a
    // virtio disk: 4 windows converted a 0.8 GB model 7 % faster than 2; 8 or 16 no faster.
    static constexpr std::size_t kWindowsInFlight = 4;
    // Bytes handed over but not yet retired above which the writer waits.
    static constexpr std::uint64_t kMaxPendingBytes = kWindowBytes * (kWindowsInFlight + 1);
    // Retired bytes between two fdatasync calls of the helper.
    static constexpr std::uint64_t kSyncBytes = std::uint64_t{256} << 20;

    WriteBehind() = default;
    ~WriteBehind();
    WriteBehind(const WriteBehind&) = delete;
    WriteBehind& operator=(const WriteBehind&) = delete;

    // Starts following `file` (the previous file must be finished or abandoned).
    void start(const File& file);
    // [offset, offset + length) of the file was written.
    void written(std::uint64_t offset, std::uint64_t length);
    // Hands over the last partial window and waits until every window is on disk and out of
    // the cache; rethrows the helper's error. Durability is the caller's final fsync.
    void finish();
    // Drops the remaining work (an error path) and waits until the helper no longer touches
    // the file. Never throws.
    void abandon() noexcept;
    // Drops [offset, offset + length) of `input` from the page cache, on the helper thread when
    // it runs (else, or when kMaxQueuedDrops are waiting, right here). Advisory: never throws.
    void drop_later(const File& input, std::uint64_t offset, std::uint64_t length) noexcept;
    static constexpr std::size_t kMaxQueuedDrops = 256;

  private:
    struct Range {
        std::uint64_t offset = 0;
        std::uint64_t length = 0;
    };
    struct Drop {
        File input;  // a duplicate descriptor
        std::uint64_t offset = 0;
        std::uint64_t length = 0;
    };
    enum class Step : std::uint8_t { kStart, kRetire, kDrop, kSync };

    void run();
    bool must_retire_locked() const;
    bool has_step_locked() const;
    void hand_over_locked(Range range);
    void throw_if_failed_locked();

    std::mutex mutex_;
    std::condition_variable work_;  // the helper waits here
    std::condition_variable done_;  // the writer waits here
    std::thread thread_;
    bool stop_ = false;
    bool busy_ = false;
    bool finishing_ = false;
    const File* file_ = nullptr;
    std::deque<Range> queued_;   // full windows not started yet
    std::deque<Range> started_;  // under write-back, oldest first
    std::deque<Drop> drops_;     // input ranges to drop
    std::uint64_t pending_ = 0;  // bytes in queued_ and started_
    std::uint64_t retired_since_sync_ = 0;
    std::exception_ptr error_;
    // The window being filled (writer thread only).
    std::uint64_t window_begin_ = UINT64_MAX;
    std::uint64_t window_end_ = 0;
};

}  // namespace z2f::io
