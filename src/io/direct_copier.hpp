// The direct-I/O copy engine (`--io direct`): output files assembled block by block in aligned
// memory and written with O_DIRECT, several blocks in flight (direct_writer.hpp), from inputs
// read buffered when they are in the page cache or with O_DIRECT, read ahead, when they are not
// (direct_reader.hpp).
//
// A copy writes one byte range of one file, described piece by piece in file order: known
// bytes (headers, zip local headers, HDF5 metadata), tensor slots (or the part of one that
// falls in the range), and deferred bytes that the caller produces when the stream reaches
// them (a torch zip's data descriptors and central directory, from the CRC-32s of the slots
// written before them). The pieces tile the range, so every byte of every block is ours.
//
//   input extents --pread (warm) or DirectReader (cold)--> [convert] --> writer block --> disk
//
// Without a conversion the bytes go straight into the writer's block (a buffered pread lands
// there; a direct read is one copy from the reader's block); with one, whole elements go
// through a chunk and a staging buffer. The input CRC check folds the raw bytes into its
// pieces on the way (check_ranges.hpp), the slot CRC (zip records) the output bytes.
//
// Memory: within `buffer_size`. With buffered reads, half for the writer's blocks; with direct
// reads, half for the reader's blocks and a quarter for the writer's (one disk serves both, and
// reads with fewer requests in flight than the writes wait behind them). Each side sends up to
// eight blocks of an eighth of its share, not below 2 MiB unless the share holds fewer than two
// of those, never above the plan's block. A sixteenth for the reader's copies of shared pages
// (direct reads only), an eighth and a sixteenth for the conversion's staging and chunk; each
// at least one 4 KiB block. With the default 32 MiB and 4 MiB plan blocks: warm, eight 2 MiB
// writer blocks; cold, eight 2 MiB reader blocks and four 2 MiB writer blocks.
//
// Direct reads follow the list of the extents the copies will read, in order, handed over
// ahead of the copies (add_reads): the reader runs ahead along it, and forgets what it has
// read, so the caller decides how much of the list exists at once.
//
// Warm or cold: ReadMode::kAuto samples the page cache over `sample` (mincore, 32 windows) and
// reads buffered when at least half of it is cached: a copy from memory is 5-8x faster than a
// device read, and a device read through the page cache is no faster than a direct one and
// leaves the input behind in the cache (docs/io-engine.md). Nothing is dropped from the page
// cache afterwards: buffered reads take only what was cached already.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/dtype.hpp"
#include "common/extent.hpp"
#include "io/aligned_buffer.hpp"
#include "io/check_ranges.hpp"
#include "io/direct_reader.hpp"
#include "io/direct_writer.hpp"
#include "io/input_files.hpp"

namespace z2f::io {

struct DirectCopyOptions {
    std::size_t buffer_size = std::size_t{16} << 20;
    std::size_t block_size = std::size_t{4} << 20;  // the plan's block: writer blocks at most this
    ReadMode read_mode = ReadMode::kAuto;
    IoEngine write_engine = IoEngine::kThreads;  // docs/io-engine.md
    IoEngine read_engine = IoEngine::kIoUring;
    // false (--io buffered): the outputs are written through the page cache.
    bool direct_writes = true;
    // Compare each range with the file already there instead of writing it (--verify):
    // take_mismatches() says where they differ. Nothing is written.
    bool compare = false;
    // Called after every chunk with the number of output bytes it completed; returns false to
    // stop the copy (an error elsewhere, a termination signal): the copy then throws
    // CopyStopped, and the caller, who knows why, says so.
    std::function<bool(std::uint64_t)> on_progress;
};

// Thrown by a copy that on_progress asked to stop.
struct CopyStopped {};

// One tensor to place: its source extents (their concatenation is the tensor's data in
// `source_dtype`), the dtype it is written in, its output slot, and whether the slot's CRC-32
// is wanted. `name` only serves error messages.
struct SlotCopy {
    std::span<const SourceExtent> extents;
    DType source_dtype = DType::kF32;
    DType output_dtype = DType::kF32;
    std::uint64_t offset = 0;
    std::uint64_t length = 0;  // output bytes
    bool want_crc = false;
    std::string_view name;
    // Input CRC check: ranges of the extents whose raw bytes (as read, before any conversion)
    // go into check pieces, ordered by extent, then offset.
    std::span<const CrcRange> check_ranges;
    // An averaged tensor: its bytes are the element-wise mean of these streams (source dtype,
    // replica_mean.hpp), and `extents` is empty; the input check reads replicas on its own.
    std::span<const std::vector<SourceExtent>> replicas;
};

// One piece of a range, in file order.
struct RangePiece {
    enum class Kind : std::uint8_t { kBytes, kSlot, kDeferred };
    Kind kind = Kind::kBytes;
    std::uint64_t offset = 0;
    std::uint64_t length = 0;
    std::span<const std::byte> bytes;  // kBytes
    std::size_t slot = 0;              // kSlot: index into RangeCopy::slots
    std::int64_t tail = -1;            // kDeferred: the caller's own index
};

struct RangeCopy {
    std::string path;
    std::uint64_t begin = 0;
    std::uint64_t end = 0;
    std::optional<std::uint64_t> final_size;  // the range ends the file (direct_writer.hpp)
    std::uint64_t tag = 0;                    // given back by take_durable()
    std::vector<RangePiece> pieces;           // tiling [begin, end)
    std::span<const SlotCopy> slots;          // kSlot pieces' copies (offset, length match)
    // The bytes of a kDeferred piece, given the CRC-32s (indexed like `slots`) of the slots
    // written so far; must be exactly piece.length bytes.
    std::function<std::vector<std::byte>(const RangePiece&, std::span<const std::uint32_t>)>
        deferred;
};

class DirectCopier {
  public:
    // `paths`: the input files SourceExtent::file indexes. The extents the copies will read,
    // in order (empty ones included), are handed over with add_reads(), the first ones before
    // the first copy and the others ahead of the copies that read them: the direct reader reads
    // ahead along them. `sample`: ranges spread over all the bytes the copies will read, as
    // few as suit (each task's spans per file), from which kAuto tells warm from cold.
    DirectCopier(InputFiles& inputs, std::vector<std::string> paths,
                 std::span<const ReadRange> sample, const DirectCopyOptions& options);
    ~DirectCopier();
    DirectCopier(const DirectCopier&) = delete;
    DirectCopier& operator=(const DirectCopier&) = delete;

    // More extents the copies will read, after those added before.
    void add_reads(std::span<const ReadRange> reads);
    // Writes the range (its last blocks and its fdatasync may still be in flight on return);
    // returns each slot's CRC-32 (0 where want_crc is false).
    std::vector<std::uint32_t> copy(const RangeCopy& range);
    // Tags of the ranges now on disk (take_durable of direct_writer.hpp).
    std::vector<std::uint64_t> take_durable() { return writer_.take_durable(); }
    // Waits for every range to be on disk.
    void drain() { writer_.drain(); }
    // After an error: the ranges on disk not yet taken (direct_writer.hpp), never throws.
    std::vector<std::uint64_t> settle() noexcept { return writer_.settle(); }
    // With `compare`: where the ranges compared so far differ from their files.
    std::vector<DirectWriter::Mismatch> take_mismatches() { return writer_.take_mismatches(); }

    // Where the CRCs of check pieces go (indexed by CrcRange::piece); must outlive the copies.
    void collect_piece_crcs(std::span<std::uint32_t> crcs) noexcept { piece_crcs_ = crcs; }
    // Reads a range for the input check alone (buffered); returns its CRC-32.
    std::uint32_t checksum(const SourceExtent& range);

    bool direct_reads() const noexcept { return reader_ != nullptr; }
    double sampled_cached_fraction() const noexcept { return sampled_fraction_; }
    bool direct_writes() const noexcept { return writer_.direct(); }

  private:
    void copy_slot(const SlotCopy& slot, std::uint32_t& crc);
    // Raw bytes of the current extent from `offset`: at most `into.size()` bytes. Buffered:
    // read into `into`; direct: the reader's bytes (at most `into.size()`), not copied.
    std::span<const std::byte> read(const SourceExtent& extent, std::uint64_t done,
                                    std::span<std::byte> into);
    void begin_extent(const SourceExtent& extent);
    void progress(std::uint64_t bytes);

    InputFiles& inputs_;
    DirectCopyOptions options_;
    std::deque<ReadRange> reads_;  // added, not yet begun (direct reads only)
    std::size_t next_read_ = 0;    // index among all reads of the extent copied next
    std::size_t reading_ = 0;      // the extent being copied
    double sampled_fraction_ = -1.0;
    std::unique_ptr<DirectReader> reader_;  // direct reads only; before writer_, which it sizes
    std::optional<DirectReader::Piece> piece_;
    std::uint64_t piece_used_ = 0;
    AlignedBuffer chunk_;    // conversion input
    AlignedBuffer staging_;  // conversion output
    std::span<std::uint32_t> piece_crcs_;
    DirectWriter writer_;
};

}  // namespace z2f::io
