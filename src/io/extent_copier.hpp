// The copy engine: tensor bytes from input extents to output slots, through a bounded buffer.
//
// For each slot (one output tensor) the copier walks the tensor's source extents in order,
// reads them in chunks, converts the element type when the output dtype differs, optionally
// folds the output bytes into a CRC-32 (torch zip records need one), and writes them at the
// slot's offset. Memory is bounded by `buffer_size` whatever the tensor or model size:
//
//   pread            input chunk -> [convert] -> output buffer -> pwrite
//   mmap             mapped window (<= buffer) -> [convert] -> output buffer -> pwrite
//   copy_file_range  in-kernel copy, only when the bytes need neither conversion, nor a CRC,
//                    nor the input CRC check; falls back to pread where the file system
//                    refuses (EXDEV, EOPNOTSUPP...)
//
// The input CRC check (run/input_check.hpp) rides along: the raw bytes of every chunk read are
// folded into the check pieces they belong to while they are in the buffer.
//
// Consecutive slots that are contiguous in the output share buffered writes. Input ranges are
// dropped from the page cache after use (in batches of contiguous bytes per input file: each
// drop has a fixed cost) and the output is pushed to disk and out of the cache behind the copy
// (WriteBehind), because Slurm charges page cache to the job's memory limit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "common/dtype.hpp"
#include "common/extent.hpp"
#include "io/check_ranges.hpp"
#include "io/input_files.hpp"
#include "io/posix_file.hpp"
#include "io/write_behind.hpp"
#include "zero2fp32/options.hpp"

namespace z2f::io {

struct CopyOptions {
    IoBackend backend = IoBackend::kPread;
    std::size_t buffer_size = std::size_t{16} << 20;
    bool drop_input_cache = true;
    // Called after every chunk with the number of output bytes it completed; may throw to stop
    // the copy (an error elsewhere, a termination signal).
    std::function<void(std::uint64_t)> on_progress;
    // Compare with the output file instead of writing it (--verify); the buffer budget is then
    // shared three ways (input, expected output, bytes read back).
    bool compare = false;
};

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

class ExtentCopier {
  public:
    ExtentCopier(InputFiles& inputs, const CopyOptions& options);
    ~ExtentCopier();

    // Copies the slots (ascending offsets) into `output`; returns the CRC-32 of each slot that
    // asked for one (0 for the others).
    std::vector<std::uint32_t> copy(const File& output, std::span<const SlotCopy> slots);

    struct Comparison {
        std::vector<std::uint32_t> crcs;
        std::vector<bool> mismatched;  // per slot
    };
    // With CopyOptions::compare: reads `output` back and compares each slot with the bytes its
    // sources give. `output` must be open for reading.
    Comparison compare(const File& output, std::span<const SlotCopy> slots);

    // Whether copy_file_range was refused and the copier fell back to pread.
    bool fell_back() const noexcept { return fell_back_; }

    // Where the CRCs of check pieces go (indexed by CrcRange::piece); must outlive the copies.
    void collect_piece_crcs(std::span<std::uint32_t> crcs) noexcept { piece_crcs_ = crcs; }
    // Reads a range for the input check alone, through the input buffer; returns its CRC-32.
    std::uint32_t checksum(const SourceExtent& range);

  private:
    class OutputStream;
    // A byte range of an input read and not yet dropped from the page cache.
    struct PendingDrop {
        std::uint32_t file = 0;
        std::uint64_t begin = 0;
        std::uint64_t end = 0;
    };

    void copy_slot(OutputStream& out, const SlotCopy& slot, std::uint32_t& crc);
    // Folds the raw bytes `chunk` (input bytes from `offset` of extent `extent`) into the check
    // pieces they belong to; `cursor`: where the slot's copy is in its ranges.
    void check_chunk(const SlotCopy& slot, std::uint32_t extent, std::uint64_t offset,
                     std::span<const std::byte> chunk, CheckCursor& cursor);
    bool copy_in_kernel(OutputStream& out, const SlotCopy& slot);
    std::span<std::byte> input_chunk();
    void note_read(std::uint32_t file, std::uint64_t offset, std::uint64_t length);
    void drop(PendingDrop& range);
    void drop_all_read();

    InputFiles& inputs_;
    CopyOptions options_;
    // Allocated without zero-filling (every byte is written before it is read) and the input
    // chunk only when a path needs it: page faults on untouched buffer pages are not free.
    std::size_t share_ = 0;
    std::unique_ptr<std::byte[]> input_buffer_;
    std::unique_ptr<std::byte[]> output_buffer_;
    std::unique_ptr<std::byte[]> readback_buffer_;  // compare mode only
    std::vector<PendingDrop> pending_drops_;
    std::uint64_t pending_bytes_ = 0;
    WriteBehind write_behind_;
    std::span<std::uint32_t> piece_crcs_;
    bool fell_back_ = false;
};

}  // namespace z2f::io
