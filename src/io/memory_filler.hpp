// Filling memory that a caller owns with tensor bytes read from input extents: the direct
// engine's reads without its writer, for a process that wants the consolidated tensors
// themselves instead of files (the state dict of the Python package,
// driver/state_dict_reader.cpp).
//
// A fill is one run of whole output elements of a tensor: the source extents whose
// concatenation holds those elements in the source dtype (or, for an averaged tensor, the
// replicas whose mean they are: replica_mean.hpp), and the memory they go to, in the output
// dtype. Fills run in the order given.
//
//   input extents --pread (buffered) or DirectReader (direct)--> [convert] --> caller's memory
//
// Buffered and without a conversion, the bytes are read straight into the caller's memory: one
// copy from the page cache and no buffer in between. Direct (O_DIRECT, read ahead along every
// extent of every fill, direct_reader.hpp), they land in the reader's blocks and are copied
// once. A conversion takes whole elements through a chunk buffer into the caller's memory. The
// input CRC check folds the raw bytes into its pieces on the way (check_ranges.hpp), a chunk
// of at most 2 MiB at a time, so that the bytes are still in the CPU's cache when checksummed.
//
// The caller's memory is usually fresh (new tensors): each fill asks for its pages first, in
// one call (memory_advice.hpp), instead of taking a fault at the first write to each page.
//
// Buffered or direct: ReadMode::kAuto samples the page cache over the fills' extents (as the
// direct copier does, direct_copier.hpp) and reads buffered when at least half of it is cached.
//
// Memory: the chunk (a sixteenth of `buffer_size`, at least 64 KiB) and, with direct reads, the
// reader's blocks (half of `buffer_size`) and its copies of shared pages (a sixteenth).
//
// Stopping: `after_chunk` is called after every chunk and may throw (another thread failed,
// the caller gave up); the reads in flight are waited for by the destructor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/dtype.hpp"
#include "common/extent.hpp"
#include "io/direct_reader.hpp"
#include "io/input_files.hpp"

namespace z2f::io {

struct MemoryFill {
    std::vector<SourceExtent> extents;
    // An averaged tensor's replicas (each a stream of the same length); `extents` is then empty.
    std::vector<std::vector<SourceExtent>> replicas;
    DType source_dtype = DType::kF32;
    DType output_dtype = DType::kF32;
    std::span<std::byte> out;  // exactly the fill's output bytes
    // Check pieces the extents' bytes belong to (CrcRange::extent indexes `extents`).
    std::span<const CrcRange> check_ranges;
    std::string name;  // the tensor's, for messages
};

struct MemoryFillOptions {
    std::size_t buffer_size = std::size_t{16} << 20;
    ReadMode read_mode = ReadMode::kAuto;
    IoEngine engine = IoEngine::kIoUring;
    std::function<void()> after_chunk;
};

class MemoryFiller {
  public:
    // `inputs` opens the files SourceExtent::file indexes, `paths` names them (for the direct
    // reader). `fills` must outlive the filler.
    MemoryFiller(InputFiles& inputs, std::vector<std::string> paths,
                 std::span<const MemoryFill> fills, const MemoryFillOptions& options);
    ~MemoryFiller();
    MemoryFiller(const MemoryFiller&) = delete;
    MemoryFiller& operator=(const MemoryFiller&) = delete;

    // Runs every fill; the check bytes go into `piece_crcs` (indexed by CrcRange::piece).
    void run(std::span<std::uint32_t> piece_crcs);
    // The CRC-32 of an input range read for the check alone (buffered, through the chunk).
    std::uint32_t checksum(const SourceExtent& range);

    bool direct_reads() const noexcept { return reader_ != nullptr; }

  private:
    void fill_from_extents(const MemoryFill& fill, std::span<std::uint32_t> piece_crcs);
    void fill_with_mean(const MemoryFill& fill);
    // Up to `room.size()` bytes of `extent` from byte `done`: read into `room` (buffered) or
    // the reader's own bytes (direct), which the caller copies.
    std::span<const std::byte> take(const SourceExtent& extent, std::uint64_t done,
                                    std::span<std::byte> room);
    void chunk_done() const;

    InputFiles& inputs_;
    std::span<const MemoryFill> fills_;
    MemoryFillOptions options_;
    std::vector<std::byte> chunk_;
    std::unique_ptr<DirectReader> reader_;  // direct reads only
    std::optional<DirectReader::Piece> piece_;
    std::size_t piece_used_ = 0;
    std::size_t reading_ = 0;  // the reader's index of the extent being filled
};

}  // namespace z2f::io
