// Asynchronous positional reads and writes with a bounded number of requests in flight: the
// engine under DirectWriter and DirectReader.
//
// A request names a File, a buffer, a length and an offset, and carries a caller's tag; its
// completion gives the tag back with the bytes transferred or -errno. One request is one
// pread/pwrite (or one fdatasync): a short transfer is reported as it is, and the caller resubmits
// the rest (the writer and the reader do). Requests may complete in any order.
//
// Two engines, picked by measurement (docs/io-engine.md):
//   kIoUring  one io_uring (liburing) of `depth` entries; O_DIRECT transfers are issued from
//             the calling thread without a context switch per request.
//   kThreads  `depth` worker threads, each doing a blocking pread/pwrite.
// make_async_io falls back from io_uring to threads where the kernel refuses a ring (ENOSYS,
// EPERM: io_uring disabled by sysctl or seccomp, as some sites and containers do).
//
// The destructor waits for every request already handed to the kernel (its buffer must stay
// valid until then; no request outlives the engine) and drops the ones not started yet. One
// thread uses an engine (the io_uring one is set up IORING_SETUP_SINGLE_ISSUER: the first
// thread that submits owns the ring); the worker threads never call MPI and block every signal.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#include "io/posix_file.hpp"

namespace z2f::io {

enum class IoEngine : std::uint8_t { kIoUring, kThreads };
const char* io_engine_name(IoEngine engine) noexcept;

// kSyncData: fdatasync of the request's file (no buffer, length or offset); its completion's
// result is 0 or -errno. Files finished one after another sync in the background this way:
// one fdatasync at a time cost ~3 ms per small file on the development VM, several in flight
// almost nothing (docs/io-engine.md).
// kSizeAndSync: ftruncate of the file to `offset` bytes, then its fdatasync; the result is 0
// or the -errno of the step that failed. A file's size is set off the caller's thread this
// way: on ext4 here an ftruncate took 1.6 ms while other files' fdatasyncs kept the journal
// busy, 0.4 s of a universal checkpoint's 2.9 s (docs/io-engine.md). The io_uring engine
// runs the ftruncate in submit() (Linux 6.1's io_uring has no ftruncate).
enum class IoDirection : std::uint8_t { kRead, kWrite, kSyncData, kSizeAndSync };

struct IoRequest {
    const File* file = nullptr;
    IoDirection direction = IoDirection::kWrite;
    std::byte* buffer = nullptr;
    std::size_t length = 0;
    std::uint64_t offset = 0;
    std::uint64_t tag = 0;
};

struct IoCompletion {
    std::uint64_t tag = 0;
    std::int64_t result = 0;  // bytes transferred, or -errno
};

class AsyncIo {
  public:
    virtual ~AsyncIo() = default;
    AsyncIo() = default;
    AsyncIo(const AsyncIo&) = delete;
    AsyncIo& operator=(const AsyncIo&) = delete;

    // Starts a request; at most depth() may be in flight (submit beyond that is a bug and
    // throws an internal error). A failure of the request itself arrives as its completion.
    virtual void submit(const IoRequest& request) = 0;
    // Waits for one request to complete; needs in_flight() > 0.
    virtual IoCompletion wait_one() = 0;
    // A completion already there, without waiting; nullopt when none is (an engine may always
    // say none: callers then learn of completions by waiting).
    virtual std::optional<IoCompletion> poll_one() { return std::nullopt; }
    virtual std::size_t in_flight() const noexcept = 0;
    virtual std::size_t depth() const noexcept = 0;
    virtual IoEngine engine() const noexcept = 0;
};

// `depth` >= 1. kIoUring falls back to kThreads where io_uring is unavailable: refused by the
// kernel, or not built in (this build was configured without liburing).
std::unique_ptr<AsyncIo> make_async_io(IoEngine engine, std::size_t depth);

// Whether this build has the io_uring engine (liburing found at configure time).
bool io_uring_built_in() noexcept;

}  // namespace z2f::io
