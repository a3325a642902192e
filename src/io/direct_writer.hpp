// Sequential output streams that write byte ranges of files with O_DIRECT, several blocks in
// flight, in a fixed memory budget: the output page cache stays empty and the device never
// waits for the writer. One writer serves range after range (file after file): its blocks and
// its I/O engine are set up once, and a range's last blocks and its fdatasync are still in
// flight while the next range is being filled.
//
// A range. [begin, end) of the file at `path` (created if missing, never truncated at open:
// several writers may own ranges of one shared file). Contract with whoever cuts files into
// ranges (plan/ownership.hpp):
//   - `begin` is a multiple of kRangeAlignment (4096);
//   - `end` is a multiple of kRangeAlignment too, except at the end of the file: an unaligned
//     `end` IS the file's final size, and only the writer of that last range may have it.
// Two ranges therefore never share an aligned block, and the one padded block (below) lies
// past the end of the file, where no other range is.
//
// The caller's side. open() starts a range. buffer() gives the writable rest of the current
// block (waiting for a free one if all are in flight); the caller fills any prefix of it and
// commit()s that many bytes (append() does both from a span). A full block goes to the device
// at once; the blocks hold [begin, begin + block_size), [begin + block_size, ...), the last one
// shorter. close_range(), once the range is full, sends its last block and returns: when every
// block of the range is written, the file's size (`final_size`, when the range ends the file)
// and its fdatasync are sent to the engine as one request; when that completes, the descriptor is
// closed and the range's tag appears in take_durable(): from then on its bytes are on disk. drain()
// waits for every range; finish() is close_range() + drain() (the writer of one range).
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
// Syncs. The engine gets `sync_slots` entries beyond the blocks for fdatasyncs in flight
// (an engine with no room for them, as tests inject, syncs in the caller's thread). One
// fdatasync after another cost ~3 ms per small file on the development VM, several in flight
// almost nothing, which is what makes a universal checkpoint's thousands of files cheap. The
// ftruncate that sets a file's size goes in the same request, before its fdatasync: in the
// caller's thread it waited for the journal that the other files' syncs keep busy (1.6 ms per
// file, async_io.hpp). At most `max_open_ranges` ranges are open (written or syncing); open()
// waits below that.
//
// Memory. At most `blocks_in_flight` blocks of `block_size` bytes exist, and no more than
// memory_budget bytes: in-flight = min(blocks_in_flight, memory_budget / block_size), and a
// budget below one block shrinks the block.
//
// Fallback. Where the file system refuses O_DIRECT, at open or on the first transfer of a
// range's file (EINVAL: tmpfs before Linux 6.6, some FUSE or NFS mounts), or demands more
// alignment than the range has, the same bytes are written with buffered pwrite through the
// same pipeline (no padding); direct() tells which for the current range. A writer on io_uring
// moves to the thread engine when O_DIRECT is refused at open (io_uring hands buffered writes
// of one file to one kernel worker at a time); a refusal on the first transfer keeps the
// engine (the thread engine is the default anyway). Nothing else changes for the caller.
//
// Comparing. With `compare` (--verify), the same blocks are read back from the existing file
// (O_DIRECT where the file system takes it, each block with a twin of the same size, in the
// same budget) and compared with what would have been written; take_mismatches() gives the
// differing runs, and a range is reported in take_durable() once compared. Nothing is opened
// for writing, reserved, sized or synced.
//
// Errors. EINTR and EAGAIN completions are sent again, and a short transfer's rest too (from
// the aligned unit it ended in, when direct). A failed or short-and-stuck transfer (EIO,
// ENOSPC, EDQUOT...), a failed ftruncate, fdatasync or close is an Error naming the path and
// the offset, thrown by the next call; it belongs to its range, which is then never reported
// durable, whatever else completes: a file one of whose writes failed never gets its final
// name. The other requests in flight are still waited for, and only the first error is
// reported. The destructor without
// drain() (an error elsewhere, a signal) stops submitting, waits for the transfers the kernel
// already has (their buffers must outlive them) and leaves the files as they are; it never
// throws. Bytes are counted in io_counters() when their transfer completes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
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
    std::size_t sync_slots = 4;
    std::size_t max_open_ranges = 32;
    // false: buffered pwrite of the same bytes (what the fallback does).
    bool direct = true;
    // fallocate the range before writing (see above); skipped where unsupported.
    bool preallocate = true;
    // Blocks of 2 MiB or more in transparent huge pages (aligned_buffer.hpp says why).
    bool huge_pages = true;
    // Compare instead of write (--verify): each block is read back from the existing file and
    // compared with what would be written; nothing is created, reserved, sized or synced.
    bool compare = false;
};

class DirectWriter {
  public:
    static constexpr std::uint64_t kRangeAlignment = 4096;

    // A writer with no range open. `engine` replaces the one `options.engine` names (tests
    // inject faults through it); its depth must be at least the number of blocks.
    explicit DirectWriter(const DirectWriterOptions& options = {},
                          std::unique_ptr<AsyncIo> engine = nullptr);
    // The writer of one range: the above, then open(path, begin, end, unaligned end or none).
    DirectWriter(const std::string& path, std::uint64_t begin, std::uint64_t end,
                 const DirectWriterOptions& options = {},
                 std::unique_ptr<AsyncIo> engine = nullptr);
    ~DirectWriter();
    DirectWriter(const DirectWriter&) = delete;
    DirectWriter& operator=(const DirectWriter&) = delete;

    // Starts [begin, end) of `path`; the previous range must be closed. With `final_size`, the
    // file is cut (or extended) to it once the range is written: the writer of a file's last
    // range gives it, so that a stale longer file never keeps its tail. `tag` names the range in
    // take_durable().
    void open(const std::string& path, std::uint64_t begin, std::uint64_t end,
              std::optional<std::uint64_t> final_size, std::uint64_t tag = 0);

    // The writable rest of the current block; empty once the range is full.
    std::span<std::byte> buffer();
    // The first `bytes` of buffer() are filled.
    void commit(std::size_t bytes);
    // buffer() + copy + commit() until `data` is consumed.
    void append(std::span<const std::byte> data);
    // Needs position() == end - begin: sends the last block; the rest happens in flight.
    void close_range();
    // The tags of the ranges on disk (written, sized, fdatasync'ed, closed) since the last call,
    // in completion order. Also collects the completions already there, without waiting.
    std::vector<std::uint64_t> take_durable();
    // Waits for every range closed so far to be on disk.
    void drain();
    // After an error (the caller's or the writer's): waits for everything in flight without
    // throwing, and returns the tags of the ranges on disk not yet taken (complete files a
    // failed run keeps). The current range, if any, is left unfinished.
    std::vector<std::uint64_t> settle() noexcept;
    // close_range() + drain().
    void finish();

    // Compare mode: the byte ranges [begin, end) of a range (`tag`) whose file differs from
    // the bytes given (a file that ends too soon differs from its end on), since the last call.
    struct Mismatch {
        std::uint64_t tag = 0;
        std::uint64_t begin = 0;
        std::uint64_t end = 0;
    };
    std::vector<Mismatch> take_mismatches();

    // Bytes committed to the current range so far, from its `begin`.
    std::uint64_t position() const noexcept { return committed_; }
    // Whether the current (or last) range goes with O_DIRECT.
    bool direct() const noexcept;
    IoEngine engine() const noexcept { return io_->engine(); }
    std::size_t block_size() const noexcept { return block_size_; }
    std::size_t block_count() const noexcept { return blocks_.size(); }
    // The alignment of transfers (offsets, lengths, padding) of the current range in direct
    // mode.
    std::uint64_t alignment() const noexcept;

  private:
    struct Range {
        File file;
        std::string path;
        std::uint64_t begin = 0;
        std::uint64_t end = 0;
        std::optional<std::uint64_t> final_size;
        std::uint64_t tag = 0;
        std::uint64_t granule = kRangeAlignment;
        bool direct = false;
        bool fell_back = false;       // O_DIRECT turned off after a refused transfer
        bool needs_truncate = false;  // the size may exceed `end` (padding or reservation)
        bool any_direct_success = false;
        bool closed = false;  // every byte committed, the last block sent
        std::size_t blocks_in_flight = 0;
        bool sync_sent = false;
        // A transfer, the size, the sync or the close failed: the range is never durable.
        bool failed = false;
        std::optional<std::uint64_t> size_to_set;  // by the sync, once every block is written
    };
    struct Transfer {
        Range* range = nullptr;
        std::uint64_t offset = 0;     // of the block in the file
        std::size_t length = 0;       // to write, padding included
        std::size_t done = 0;         // written so far
        std::size_t real_length = 0;  // of data
        bool sent_direct = false;
        std::size_t stalls = 0;  // short direct writes in a row that ended in one unit
    };
    static constexpr std::size_t kNoBlock = SIZE_MAX;
    static constexpr std::size_t kMaxStalls = 8;
    static constexpr std::size_t kMaxRunsPerBlock = 16;

    std::size_t current_length() const noexcept;
    void submit_current();
    void submit(std::size_t block);
    void reap_one();
    void handle(const IoCompletion& completion);
    void complete(std::size_t block, std::int64_t result);
    void written(Range& range);
    void start_sync(Range& range);
    void synced(Range& range, std::int64_t result);
    // A failed transfer of `range` at `offset`, or with `step` a failed step after the last
    // one ("cannot sync"): the range is not durable, and the writer's first error is kept.
    void fail_range(Range& range, int errnum, std::uint64_t offset, const char* step);
    // Compare mode: the block's first `length` file bytes are in; note where they differ.
    void compared(std::size_t block, std::size_t length);
    void note_mismatch(std::uint64_t tag, std::uint64_t begin, std::uint64_t end);
    void record_error(int errnum, const std::string& path, std::uint64_t offset, const char* step);
    void throw_if_failed() const;
    void release(Range& range);

    std::size_t block_size_ = 0;
    std::size_t memory_alignment_ = kRangeAlignment;
    DirectWriterOptions options_;
    std::exception_ptr error_;  // the first one
    bool injected_engine_ = false;

    Range* current_range_ = nullptr;  // open, not closed
    Range* last_range_ = nullptr;     // for direct()/alignment() after close
    bool last_direct_ = false;
    std::uint64_t last_granule_ = kRangeAlignment;
    std::uint64_t committed_ = 0;
    std::size_t current_ = kNoBlock;  // block being filled
    std::size_t fill_ = 0;            // bytes of it filled
    std::uint64_t next_offset_ = 0;   // file offset of the current (or next) block

    std::vector<std::uint64_t> durable_;
    std::vector<Mismatch> mismatches_;
    std::deque<Range*> sync_queue_;   // written, waiting for a sync slot
    std::vector<Range*> sync_slots_;  // by slot: the range syncing there, or null

    // Declaration order is destruction order reversed: the engine goes first (it waits for
    // the kernel), then the blocks it may have been using, then the descriptors.
    std::deque<std::unique_ptr<Range>> ranges_;  // open or syncing
    std::vector<AlignedBuffer> blocks_;
    std::vector<AlignedBuffer> file_blocks_;          // compare mode: the file's bytes, by block
    std::vector<std::optional<Transfer>> transfers_;  // by block
    std::vector<std::size_t> free_blocks_;
    std::unique_ptr<AsyncIo> io_;
};

}  // namespace z2f::io
