// Reads a list of byte ranges of input files with several requests in flight, in a fixed
// memory budget, and hands each range's bytes to the caller in order.
//
// The ranges. Each names a file (an index into `paths`), an offset and a length, none of them
// aligned in any way. The reader cuts the list into read requests ("windows"). A window reads
// one stretch of one file: it starts at the aligned offset below the first byte it takes and
// takes, in range order, every later range of its file that starts inside or right after what
// it already covers (so extents that follow one another in a file share a request and no
// aligned block is read twice in a row), up to its capacity; a range larger than a window goes
// on in the next one. A window's request is widened to the alignment at both ends; the bytes
// outside the ranges are read but never shown.
//
// Interleaved files. Ranges often alternate between files whose own ranges are contiguous:
// the rows of a row-parallel weight (row r of TP shard 0, of shard 1, …, then row r + 1 of
// each, every shard's rows one after another in its file) or ZeRO-3's small tensors (each
// rank's slice of tensor t, then of t + 1). Windows are therefore planned in groups: the
// planner counts the files among the next ranges (as far as the free blocks' bytes reach, at
// most the engine's free depth), cuts the free blocks into that many equal slots (whole pages)
// and walks the ranges in order, giving each file a window in its own slot, until a range fits
// no window (its file's window is full or the range is not contiguous with it, or its file has
// none and no slot is left). Every range before that point is then in a window and the
// windows of later groups hold only later ranges: the bytes the caller waits for are always
// in a window in flight, whatever the number of files, and a 26 KB row per file becomes one
// request per file per group (one file: one window per block, as without groups).
//
// The caller's side. next() returns the next piece: the range it belongs to, the piece's
// offset within that range, and its bytes, valid until the next call. Pieces come in range
// order, each range's pieces in offset order, and concatenated they are exactly the range; a
// range of length 0 gives no piece. next() returns nullopt after the last piece.
//
// No byte is read twice in direct mode when ranges share an aligned unit (two tensors in one
// page, read at different times): a window that reads a unit holding bytes of other ranges
// keeps a copy, and a later window starting or ending in that unit takes it from there. The
// copies are bounded (`unit_cache_bytes`, oldest dropped first): beyond that a unit may be
// read twice.
//
// Direct or buffered. In direct mode (O_DIRECT) requests are aligned to the file system's
// direct-I/O alignment (statx STATX_DIOALIGN, at least 4096) and bypass the page cache: the
// fastest way to read bytes that are not cached, and nothing is left in the cache. Bytes
// already in the cache are faster read buffered (a copy from memory instead of a device
// read), so ReadMode::kAuto samples the ranges with mincore (sample_cached_fraction) and reads
// buffered when at least `warm_threshold` of the sampled pages are cached. A file whose file
// system refuses O_DIRECT (EINVAL at open or on the first read) is read buffered.
//
// Memory. At most min(blocks_in_flight, memory_budget / block_size) blocks of block_size
// bytes, the unit cache (`unit_cache_bytes`), and a small record per piece of the windows in
// flight. A block is free again when every window in it has been delivered. Requests in flight:
// at most the engine's depth (the blocks, or kGroupWindows if more). Files are opened at first
// use and stay open until the reader is destroyed.
//
// Errors. A failed read is an Error naming the file and offset; a range past the end of its
// file is an input error ("file is truncated"). Either is thrown by next(); the other requests
// in flight are waited for by the destructor, which never throws.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "io/aligned_buffer.hpp"
#include "io/async_io.hpp"
#include "io/posix_file.hpp"
#include "zero2fp32/options.hpp"  // ReadMode

namespace z2f::io {

struct ReadRange {
    std::uint32_t file = 0;  // index into the reader's paths
    std::uint64_t offset = 0;
    std::uint64_t length = 0;
};

struct DirectReaderOptions {
    // io_uring: as fast as threads for direct reads, twice as fast buffered (docs/io-engine.md).
    IoEngine engine = IoEngine::kIoUring;
    std::size_t block_size = std::size_t{4} << 20;
    std::size_t blocks_in_flight = 4;
    std::size_t memory_budget = std::size_t{16} << 20;
    ReadMode mode = ReadMode::kAuto;
    // kAuto reads buffered when at least this fraction of the sampled pages is cached.
    double warm_threshold = 0.5;
    // Pages sampled by kAuto: this many windows of 256 KiB spread over the ranges.
    std::size_t warm_samples = 32;
    // Blocks of 2 MiB or more in transparent huge pages (aligned_buffer.hpp says why).
    bool huge_pages = true;
    // Copies of aligned units shared by ranges read at different times (see above).
    std::size_t unit_cache_bytes = std::size_t{1} << 20;
};

// Fraction of the pages cached in up to `samples` windows of 256 KiB spread evenly over the
// ranges' bytes (File::cached_fraction: mincore, no page touched). 0 for no bytes.
double sample_cached_fraction(const std::vector<std::string>& paths,
                              std::span<const ReadRange> ranges, std::size_t samples);

class DirectReader {
  public:
    // Windows one group may plan when files interleave (the engine's depth when the reader
    // makes it): TP = 16 rows read as 16 requests at once.
    static constexpr std::size_t kGroupWindows = 16;

    struct Piece {
        std::size_t range = 0;     // index into the ranges
        std::uint64_t offset = 0;  // of the piece within its range
        std::span<const std::byte> bytes;
    };

    // `engine` replaces the one options.engine names (tests inject faults through it); its
    // depth must be at least the number of blocks, and bounds the windows of a group.
    DirectReader(std::vector<std::string> paths, std::vector<ReadRange> ranges,
                 const DirectReaderOptions& options = {},
                 std::unique_ptr<AsyncIo> engine = nullptr);
    ~DirectReader();
    DirectReader(const DirectReader&) = delete;
    DirectReader& operator=(const DirectReader&) = delete;

    std::optional<Piece> next();

    // Appends ranges to the list (their pieces follow every earlier range's); the ranges the
    // reader has planned are forgotten, so a caller that hands over its ranges a few at a time
    // keeps only those ahead in memory. Piece::range goes on counting from the first range.
    void extend(std::span<const ReadRange> ranges);

    // Whether the reader asked for O_DIRECT (kAuto: what the sample decided). A file whose
    // file system refused it is read buffered all the same.
    bool direct() const noexcept { return direct_; }
    // What kAuto sampled (-1 for the other modes).
    double sampled_cached_fraction() const noexcept { return sampled_fraction_; }
    IoEngine engine() const noexcept { return io_->engine(); }
    std::size_t block_size() const noexcept { return block_size_; }
    std::size_t block_count() const noexcept { return blocks_.size(); }

  private:
    struct InputState {
        File file;
        bool direct = false;
        bool any_success = false;
        std::uint64_t granule = 1;  // request alignment: 1 when buffered
    };
    struct PieceRef {
        std::size_t range = 0;
        std::uint64_t offset_in_range = 0;
        std::size_t offset_in_window = 0;
        std::size_t length = 0;
    };
    struct Window {
        std::uint64_t id = 0;  // the engine's tag
        std::uint32_t file = 0;
        std::uint64_t begin = 0;  // aligned
        std::size_t length = 0;   // of the request, aligned
        std::size_t needed = 0;   // bytes from `begin` the pieces need
        std::size_t done = 0;
        std::size_t reused_head = 0;  // bytes at the start copied from the unit cache, not read
        std::size_t reused_tail = 0;  // the same at the end
        std::size_t block = 0;
        std::size_t block_offset = 0;  // of the window's slot in its block
        bool complete = false;
        std::vector<PieceRef> pieces;
        std::size_t next_piece = 0;
    };

    // The bytes a window's request must bring: up to `needed`, short of the cached tail unit.
    static std::size_t request_end(const Window& window) noexcept;
    InputState& input(std::uint32_t file);
    // Boundary units: an aligned unit of which a window needs only part (the rest belongs to a
    // range read later: another tensor sharing the page) is kept, so that the later window
    // takes it from memory. Bounded: the oldest go first.
    const std::vector<std::byte>* cached_unit(std::uint32_t file, std::uint64_t offset) const;
    void cache_unit(std::uint32_t file, std::uint64_t offset, const std::byte* bytes,
                    std::size_t length);
    // Plans the next group of windows into free blocks (see above); false when there is
    // nothing left to plan, no free block or no free depth.
    bool plan_group();
    void check_files(std::span<const ReadRange> ranges) const;
    const ReadRange& range_at(std::size_t index) const { return ranges_[index - range_base_]; }
    std::size_t range_end() const noexcept { return range_base_ + ranges_.size(); }
    // How many files the ranges from the planning cursor interleave, counted as far as
    // `bytes` of them reach, at most `limit`.
    std::size_t interleaved_files(std::uint64_t bytes, std::size_t limit) const;
    // Takes the cached head and tail units of a planned window, then submits the rest.
    void start(Window& window);
    std::byte* data(const Window& window) noexcept;
    void submit(Window& window);
    void reap_one();
    Window& window_of_id(std::uint64_t id);
    // The window holding the next piece in range order (windows_ not empty).
    std::list<Window>::iterator next_window();
    void fail(std::exception_ptr error);

    std::vector<std::string> paths_;
    std::deque<ReadRange> ranges_;  // from range_base_ on: the ones not yet planned (and a few)
    std::size_t range_base_ = 0;    // index of ranges_.front() among all ranges
    std::size_t block_size_ = 0;
    std::map<std::pair<std::uint32_t, std::uint64_t>, std::vector<std::byte>> units_;
    std::deque<std::pair<std::uint32_t, std::uint64_t>> unit_order_;  // oldest first
    std::size_t unit_budget_ = 0;                                     // bytes
    std::size_t unit_bytes_ = 0;
    bool direct_ = false;
    double sampled_fraction_ = -1.0;

    // Planning cursor: the next byte of the ranges not yet in a window.
    std::size_t plan_range_ = 0;
    std::uint64_t plan_offset_ = 0;  // within range_at(plan_range_)

    std::exception_ptr error_;
    std::list<Window> windows_;  // issued, in planning order; erased once delivered
    std::uint64_t next_id_ = 0;
    std::size_t incomplete_ = 0;  // windows whose request is in the engine
    // The window of the piece in the caller's hands, if any.
    std::optional<std::list<Window>::iterator> delivered_;

    // Destroyed in reverse: the engine first (it waits for the kernel), then the blocks, then
    // the descriptors.
    std::vector<std::unique_ptr<InputState>> inputs_;
    std::vector<AlignedBuffer> blocks_;
    std::vector<std::size_t> free_blocks_;
    std::vector<std::size_t> block_windows_;  // windows not yet delivered, per block
    std::unique_ptr<AsyncIo> io_;
};

}  // namespace z2f::io
