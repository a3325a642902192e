// A sequential output stream that writes one byte range of a file with O_DIRECT, several
// blocks in flight, in a fixed memory budget: the output page cache stays empty and the device
// never waits for the writer.
//
// The range. [begin, end) of the file at `path` (created if missing, never truncated: several
// writers may own ranges of one shared file). Contract with whoever cuts files into ranges:
//   - `begin` is a multiple of kRangeAlignment (4096);
//   - `end` is a multiple of kRangeAlignment too, except at the end of the file: an unaligned
//     `end` IS the file's final size, and only the writer of that last range may have it.
// Two ranges therefore never share an aligned block, and the one padded block (below) lies
// past the end of the file, where no other range is.
//
// The caller's side. buffer() gives the writable rest of the current block (waiting for a free
// one if all are in flight); the caller fills any prefix of it and commit()s that many bytes
// (append() does both from a span). A full block goes to the device at once; the blocks hold
// [begin, begin + block_size), [begin + block_size, ...), the last one shorter. finish(), once
// the range is full, waits for every block, fixes the size, calls fdatasync once, and closes.
//
// On the device. Every transfer is a multiple of the file system's direct-I/O alignment at an
// aligned offset from aligned memory (statx STATX_DIOALIGN, rounded up to 4096; 4096 where the
// file system does not say). The range's last block, when `end` is unaligned, is written padded
// with zeros up to the alignment and the file is then ftruncate()d to `end`; so every byte goes
// one way and one descriptor suffices (a second, buffered descriptor for the tail would leave
// it in the page cache and need its own error handling). Before the first write the range is
// reserved with fallocate (where the file system has it): a full disk or quota is then found
// before the first byte rather than after the last, and the range is allocated in one piece;
// on ext4 here it neither helps nor hurts the speed (docs/io-engine.md).
//
// Memory. At most `blocks_in_flight` blocks of `block_size` bytes exist, and no more than
// memory_budget bytes: in-flight = min(blocks_in_flight, memory_budget / block_size), and a
// budget below one block shrinks the block.
//
// Fallback. Where the file system refuses O_DIRECT, at open or on the first transfer (EINVAL:
// tmpfs before Linux 6.6, some FUSE or NFS mounts), or demands more alignment than the range
// has, the same bytes are written with buffered pwrite through the same pipeline (no padding);
// direct() tells which; buffered writes always use the thread engine (io_uring hands buffered
// writes of one file to one kernel worker at a time). Nothing else changes for the caller.
//
// Errors. A failed or short-and-stuck transfer (EIO, ENOSPC, EDQUOT...) is an Error naming the
// path and the offset, thrown by the next buffer(), commit(), append() or finish(); the other
// requests in flight are still waited for, and only the first error is reported. The destructor
// without finish() (an error elsewhere, a signal) stops submitting, waits for the transfers
// the kernel already has (their buffers must outlive them) and leaves the file as it is; it
// never throws. Bytes are counted in io_counters() when their transfer completes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "io/aligned_buffer.hpp"
#include "io/async_io.hpp"
#include "io/posix_file.hpp"

namespace z2f::io {

struct DirectWriterOptions {
    // Defaults from bench/io_engine.sh on a virtio disk (docs/io-engine.md): the thread engine
    // was as fast as io_uring or faster at 4 MiB blocks, and works where io_uring is disabled.
    IoEngine engine = IoEngine::kThreads;
    std::size_t block_size = std::size_t{4} << 20;
    std::size_t blocks_in_flight = 4;
    std::size_t memory_budget = std::size_t{16} << 20;
    // false: buffered pwrite of the same bytes (what the fallback does).
    bool direct = true;
    // fallocate the range before writing (see above); skipped where unsupported.
    bool preallocate = true;
    // Blocks of 2 MiB or more in transparent huge pages (aligned_buffer.hpp says why).
    bool huge_pages = true;
};

class DirectWriter {
  public:
    static constexpr std::uint64_t kRangeAlignment = 4096;

    // [begin, end) of `path`. `engine` replaces the one `options.engine` names (tests inject
    // faults through it); its depth must be at least the number of blocks.
    DirectWriter(const std::string& path, std::uint64_t begin, std::uint64_t end,
                 const DirectWriterOptions& options = {},
                 std::unique_ptr<AsyncIo> engine = nullptr);
    ~DirectWriter();
    DirectWriter(const DirectWriter&) = delete;
    DirectWriter& operator=(const DirectWriter&) = delete;

    // The writable rest of the current block; empty once the range is full.
    std::span<std::byte> buffer();
    // The first `bytes` of buffer() are filled.
    void commit(std::size_t bytes);
    // buffer() + copy + commit() until `data` is consumed.
    void append(std::span<const std::byte> data);
    // Needs position() == end - begin. Waits for every block, sets the size, fdatasync, close.
    void finish();

    // Bytes committed so far, from `begin`.
    std::uint64_t position() const noexcept { return committed_; }
    bool direct() const noexcept { return direct_; }
    IoEngine engine() const noexcept { return io_->engine(); }
    std::size_t block_size() const noexcept { return block_size_; }
    std::size_t block_count() const noexcept { return blocks_.size(); }
    // The alignment of transfers (offsets, lengths, padding) in direct mode.
    std::uint64_t alignment() const noexcept { return granule_; }

  private:
    struct Transfer {
        std::uint64_t offset = 0;     // of the block in the file
        std::size_t length = 0;       // to write, padding included
        std::size_t done = 0;         // written so far
        std::size_t real_length = 0;  // of data
    };
    static constexpr std::size_t kNoBlock = SIZE_MAX;

    std::size_t current_length() const noexcept;
    void submit_current();
    void submit(std::size_t block);
    void reap_one();
    void complete(std::size_t block, std::int64_t result);
    void fall_back_to_buffered(std::size_t refused);
    void record_error(int errnum, std::uint64_t offset);
    void throw_if_failed() const;

    std::string path_;
    std::uint64_t begin_ = 0;
    std::uint64_t end_ = 0;
    std::size_t block_size_ = 0;
    std::uint64_t granule_ = kRangeAlignment;
    bool direct_ = false;
    bool needs_truncate_ = false;  // the size may exceed `end` (padding or reservation)
    bool any_direct_success_ = false;
    bool finished_ = false;
    int error_ = 0;
    std::uint64_t error_offset_ = 0;

    std::uint64_t committed_ = 0;
    std::size_t current_ = kNoBlock;  // block being filled
    std::size_t fill_ = 0;            // bytes of it filled
    std::uint64_t next_offset_ = 0;   // file offset of the current (or next) block

    // Declaration order is destruction order reversed: the engine goes first (it waits for
    // the kernel), then the blocks it may have been using, then the descriptor.
    File file_;
    std::vector<AlignedBuffer> blocks_;
    std::vector<std::optional<Transfer>> transfers_;  // by block
    std::vector<std::size_t> free_blocks_;
    std::unique_ptr<AsyncIo> io_;
};

}  // namespace z2f::io
