#include "io/extent_copier.hpp"

#include <algorithm>
#include <cstring>

#include "common/crc32.hpp"
#include "common/errors.hpp"
#include "io/check_ranges.hpp"
#include "io/dtype_convert.hpp"
#include "io/mapped_window.hpp"
#include "io/replica_mean.hpp"

namespace z2f::io {
namespace {

// Contiguous input bytes dropped from the page cache at once. A drop costs a system call and a
// walk of the cache besides the pages it frees; per chunk it took 0.1 s of a 1 s conversion.
constexpr std::uint64_t kDropBatch = std::uint64_t{32} << 20;
// Read bytes not yet dropped, over all inputs, at most (about).
constexpr std::uint64_t kMaxPendingDropBytes = std::uint64_t{128} << 20;

}  // namespace

// Buffered writer of one output file: collects contiguous bytes, writes them with pwrite, and
// reports them to the write-behind helper, which keeps the output's page-cache footprint
// bounded.
class ExtentCopier::OutputStream {
  public:
    OutputStream(const File& file, std::span<std::byte> buffer, WriteBehind& write_behind)
        : file_(file), buffer_(buffer), write_behind_(&write_behind) {}
    // Compare mode: flush() reads the file back and compares instead of writing.
    OutputStream(const File& file, std::span<std::byte> buffer, std::span<std::byte> readback)
        : file_(file), buffer_(buffer), readback_(readback), compare_(true) {}

    bool mismatched() const noexcept { return mismatched_; }
    void reset_mismatch() noexcept { mismatched_ = false; }

    // Writable space (at least `item` bytes) for bytes going to `offset`; flushes first when
    // `offset` does not continue the pending bytes or when less than `item` bytes are free.
    std::span<std::byte> space_at(std::uint64_t offset, std::size_t item) {
        if (used_ > 0 && (offset != start_ + used_ || buffer_.size() - used_ < item)) {
            flush();
        }
        if (used_ == 0) {
            start_ = offset;
        }
        return buffer_.subspan(used_);
    }
    void commit(std::size_t bytes) { used_ += bytes; }
    const File& file() const noexcept { return file_; }

    void flush() {
        if (used_ == 0) {
            return;
        }
        if (compare_) {
            std::span<std::byte> actual = readback_.first(used_);
            std::size_t got = file_.read_at_most(start_, actual);
            if (got != used_ || std::memcmp(actual.data(), buffer_.data(), used_) != 0) {
                mismatched_ = true;
            }
        } else {
            file_.write_all(start_, std::span(buffer_.data(), used_));
            note_written(start_, used_);
        }
        used_ = 0;
    }

    // Bytes written around the buffer (copy_file_range) are reported too.
    void note_written(std::uint64_t offset, std::uint64_t length) {
        if (write_behind_ != nullptr) {
            write_behind_->written(offset, length);
        }
    }

  private:
    const File& file_;
    std::span<std::byte> buffer_;
    std::span<std::byte> readback_;
    WriteBehind* write_behind_ = nullptr;
    bool compare_ = false;
    bool mismatched_ = false;
    std::size_t used_ = 0;
    std::uint64_t start_ = 0;
};

ExtentCopier::ExtentCopier(InputFiles& inputs, const CopyOptions& options)
    : inputs_(inputs), options_(options) {
    // Half the budget for output bytes, half for input chunks (pread + conversion) or mapped
    // windows, so the total stays within --buffer-size.
    // A whole number of pages: a share that is not a multiple of the element size once left
    // a few bytes no element fits in, and --verify looped forever.
    share_ = std::max<std::size_t>(options_.buffer_size / (options_.compare ? 3 : 2) / 4096 * 4096,
                                   4096);
    output_buffer_ = std::make_unique_for_overwrite<std::byte[]>(share_);
    if (options_.compare) {
        readback_buffer_ = std::make_unique_for_overwrite<std::byte[]>(share_);
    }
}

std::span<std::byte> ExtentCopier::input_chunk() {
    if (!input_buffer_) {
        input_buffer_ = std::make_unique_for_overwrite<std::byte[]>(share_);
    }
    return {input_buffer_.get(), share_};
}

void ExtentCopier::note_read(std::uint32_t file, std::uint64_t offset, std::uint64_t length) {
    if (!options_.drop_input_cache) {
        return;
    }
    // ZeRO-3 tensors interleave W inputs; within one input, the next read often continues the
    // last (tensors in flat-buffer order), so one pending range per input merges such reads.
    // Outputs in another order (safetensors sorts by name) break the runs: each drop then goes
    // to the write-behind thread, off the copy path.
    auto it = std::find_if(pending_drops_.begin(), pending_drops_.end(),
                           [&](const PendingDrop& pending) { return pending.file == file; });
    if (it == pending_drops_.end()) {
        it = pending_drops_.insert(pending_drops_.end(), PendingDrop{file, offset, offset});
    } else if (offset != it->end) {
        drop(*it);
        it->begin = it->end = offset;
    }
    it->end += length;
    pending_bytes_ += length;
    if (it->end - it->begin >= kDropBatch) {
        drop(*it);
    }
    // Read pages are clean and reclaimable, but a job's memory limit counts them: the ranges
    // of many interleaved inputs (ZeRO-3 at large W) must not add up.
    if (pending_bytes_ >= kMaxPendingDropBytes) {
        drop_all_read();
    }
}

void ExtentCopier::drop(PendingDrop& range) {
    // Advisory: an input the descriptor cache has closed since keeps its pages.
    if (const File* input = inputs_.find_open(range.file);
        input != nullptr && range.end > range.begin) {
        write_behind_.drop_later(*input, range.begin, range.end - range.begin);
    }
    pending_bytes_ -= range.end - range.begin;
    range.begin = range.end;
}

void ExtentCopier::drop_all_read() {
    for (PendingDrop& pending : pending_drops_) {
        drop(pending);
    }
    pending_drops_.clear();
}

ExtentCopier::~ExtentCopier() = default;

std::vector<std::uint32_t> ExtentCopier::copy(const File& output, std::span<const SlotCopy> slots) {
    OutputStream out(output, {output_buffer_.get(), share_}, write_behind_);
    std::vector<std::uint32_t> crcs(slots.size(), 0);
    write_behind_.start(output);
    try {
        for (std::size_t i = 0; i < slots.size(); ++i) {
            if (!copy_in_kernel(out, slots[i])) {
                copy_slot(out, slots[i], crcs[i]);
            }
        }
        out.flush();
        write_behind_.finish();
    } catch (...) {
        // The helper must be done with `output` before the caller closes it.
        write_behind_.abandon();
        throw;
    }
    drop_all_read();
    return crcs;
}

ExtentCopier::Comparison ExtentCopier::compare(const File& output,
                                               std::span<const SlotCopy> slots) {
    if (!options_.compare) {
        throw_internal_error("ExtentCopier::compare without CopyOptions::compare");
    }
    OutputStream out(output, {output_buffer_.get(), share_}, {readback_buffer_.get(), share_});
    Comparison result;
    result.crcs.assign(slots.size(), 0);
    result.mismatched.assign(slots.size(), false);
    for (std::size_t i = 0; i < slots.size(); ++i) {
        out.reset_mismatch();
        copy_slot(out, slots[i], result.crcs[i]);
        out.flush();
        result.mismatched[i] = out.mismatched();
    }
    drop_all_read();
    return result;
}

bool ExtentCopier::copy_in_kernel(OutputStream& out, const SlotCopy& slot) {
    if (options_.backend != IoBackend::kCopyFileRange || options_.compare || fell_back_ ||
        slot.want_crc || slot.source_dtype != slot.output_dtype || !slot.check_ranges.empty()) {
        return false;
    }
    out.flush();
    std::uint64_t position = slot.offset;
    for (const SourceExtent& extent : slot.extents) {
        const File& input = inputs_.get(extent.file);
        std::uint64_t done = 0;
        while (done < extent.length) {
            // Nothing passes through our buffers: bounded by the write-behind window instead.
            std::uint64_t want =
                std::min<std::uint64_t>(extent.length - done, WriteBehind::kWindowBytes);
            std::int64_t copied =
                copy_file_range_once(input, extent.offset + done, out.file(), position, want);
            if (copied < 0) {
                // Refused (another file system, no support): the pread path redoes this slot;
                // rewriting the bytes already copied is harmless.
                fell_back_ = true;
                return false;
            }
            if (copied == 0) {
                throw_input_error(input.path(), "file is truncated: expected " +
                                                    std::to_string(extent.length - done) +
                                                    " more bytes at offset " +
                                                    std::to_string(extent.offset + done));
            }
            auto bytes = static_cast<std::uint64_t>(copied);
            out.note_written(position, bytes);
            note_read(extent.file, extent.offset + done, bytes);
            done += bytes;
            position += bytes;
            if (options_.on_progress) {
                options_.on_progress(bytes);
            }
        }
    }
    return true;
}

void ExtentCopier::copy_slot(OutputStream& out, const SlotCopy& slot, std::uint32_t& crc) {
    const bool convert = slot.source_dtype != slot.output_dtype;
    const std::size_t in_item = dtype_size(slot.source_dtype);
    const std::size_t out_item = dtype_size(slot.output_dtype);
    std::uint64_t position = slot.offset;
    crc = 0;
    if (!slot.replicas.empty()) {
        // Means of at most a quarter of the output share at a time, converted into the output.
        const std::size_t room = share_ / 4 / std::max(in_item, out_item) * in_item;
        stream_replica_mean(
            inputs_, slot.replicas, slot.source_dtype, input_chunk(),
            [&](std::span<const std::byte> mean) {
                for (std::size_t at = 0; at < mean.size(); at += room) {
                    std::span<const std::byte> part =
                        mean.subspan(at, std::min(room, mean.size() - at));
                    const std::size_t bytes = part.size() / in_item * out_item;
                    std::span<std::byte> target = out.space_at(position, bytes).first(bytes);
                    convert_elements(slot.source_dtype, part, slot.output_dtype, target);
                    if (slot.want_crc)
                        crc = crc32_update(crc, target);
                    out.commit(bytes);
                    position += bytes;
                    if (options_.on_progress)
                        options_.on_progress(bytes);
                }
            });
        if (position != slot.offset + slot.length)
            throw_internal_error("averaged tensor '" + std::string(slot.name) + "' filled " +
                                 std::to_string(position - slot.offset) + " of its " +
                                 std::to_string(slot.length) + " output bytes");
        return;
    }
    CheckCursor check_cursor;
    for (std::uint32_t e = 0; e < slot.extents.size(); ++e) {
        const SourceExtent& extent = slot.extents[e];
        if (extent.length % in_item != 0) {
            throw_internal_error("extent of '" + std::string(slot.name) +
                                 "' is not a whole number of elements");
        }
        const File& input = inputs_.get(extent.file);
        std::uint64_t done = 0;
        while (done < extent.length) {
            std::span<std::byte> space = out.space_at(position, out_item);
            std::uint64_t elements = (extent.length - done) / in_item;
            elements = std::min<std::uint64_t>(elements, space.size() / out_item);
            const std::size_t window = share_;
            if (convert || options_.backend == IoBackend::kMmap) {
                elements = std::min<std::uint64_t>(elements, window / in_item);
            }
            const std::size_t in_bytes = static_cast<std::size_t>(elements * in_item);
            const std::size_t out_bytes = static_cast<std::size_t>(elements * out_item);
            std::span<std::byte> target = space.first(out_bytes);
            const std::uint64_t source_offset = extent.offset + done;
            if (options_.backend == IoBackend::kMmap) {
                with_mapped_range(
                    input, source_offset, in_bytes, [&](std::span<const std::byte> src) {
                        check_chunk(slot, e, source_offset, src, check_cursor);
                        if (convert) {
                            convert_elements(slot.source_dtype, src, slot.output_dtype, target);
                        } else {
                            std::memcpy(target.data(), src.data(), in_bytes);
                        }
                    });
            } else if (convert) {
                std::span<std::byte> chunk = input_chunk().first(in_bytes);
                input.read_exact(source_offset, chunk);
                check_chunk(slot, e, source_offset, chunk, check_cursor);
                convert_elements(slot.source_dtype, chunk, slot.output_dtype, target);
            } else {
                input.read_exact(source_offset, target);
                check_chunk(slot, e, source_offset, target, check_cursor);
            }
            if (slot.want_crc) {
                crc = crc32_update(crc, target);
            }
            out.commit(out_bytes);
            note_read(extent.file, source_offset, in_bytes);
            position += out_bytes;
            done += in_bytes;
            if (options_.on_progress) {
                options_.on_progress(out_bytes);
            }
        }
    }
    if (position != slot.offset + slot.length) {
        throw_internal_error("tensor '" + std::string(slot.name) + "' filled " +
                             std::to_string(position - slot.offset) + " of its " +
                             std::to_string(slot.length) + " output bytes");
    }
}

void ExtentCopier::check_chunk(const SlotCopy& slot, std::uint32_t extent, std::uint64_t offset,
                               std::span<const std::byte> chunk, CheckCursor& cursor) {
    fold_check_ranges(slot.check_ranges, piece_crcs_, extent, offset, chunk, cursor);
}

std::uint32_t ExtentCopier::checksum(const SourceExtent& range) {
    const std::uint32_t crc =
        checksum_range(inputs_.get(range.file), range.offset, range.length, input_chunk(),
                       [&](std::uint64_t offset, std::size_t bytes) {
                           note_read(range.file, offset, bytes);
                           if (options_.on_progress)
                               options_.on_progress(0);  // a chance to stop: signals, a failed peer
                       });
    drop_all_read();
    return crc;
}

}  // namespace z2f::io
