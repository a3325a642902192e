#include "io/direct_copier.hpp"

#include <algorithm>
#include <cstring>

#include "common/crc32.hpp"
#include "common/errors.hpp"
#include "io/check_ranges.hpp"
#include "io/dtype_convert.hpp"
#include "io/replica_mean.hpp"

namespace z2f::io {
namespace {

constexpr std::size_t kMinBlock = 4096;
// kAuto reads buffered from this fraction of sampled pages in the page cache up.
constexpr double kWarmThreshold = 0.5;
constexpr std::size_t kWarmSamples = 32;

std::size_t at_least_a_block(std::size_t bytes) {
    return std::max(bytes / kMinBlock * kMinBlock, kMinBlock);
}

// Blocks for a side (reader or writer) of `budget` bytes: eight of its eighth, but not below
// 2 MiB (one huge page: smaller blocks were slower, docs/io-engine.md) unless the budget allows
// no two of those, and never above the plan's block. A large plan block (a 16 MiB Lustre stripe)
// means smaller blocks, never more memory; the plan's cuts are multiples of any of them.
std::size_t side_block(std::size_t budget, std::size_t plan_block) {
    const std::size_t two_mib = std::size_t{2} << 20;
    return std::min(at_least_a_block(plan_block),
                    at_least_a_block(std::max(budget / 8, std::min(two_mib, budget / 2))));
}

// With buffered reads the writer has half the budget. With direct reads the reader has the
// half and the writer a quarter: on one disk both queue at the device, and a reader with as
// many requests in flight as the writer keeps its reads from waiting behind the writes
// (docs/io-engine.md, "Where a run waits").
DirectWriterOptions writer_options(const DirectCopyOptions& options, bool direct_reads) {
    DirectWriterOptions writer;
    writer.engine = options.write_engine;
    writer.memory_budget = at_least_a_block(options.buffer_size / (direct_reads ? 4 : 2));
    writer.block_size = side_block(writer.memory_budget, options.block_size);
    writer.blocks_in_flight = 8;
    writer.direct = options.direct_writes;
    writer.compare = options.compare;
    return writer;
}

DirectReaderOptions reader_options(const DirectCopyOptions& options) {
    DirectReaderOptions reader;
    reader.engine = options.read_engine;
    reader.mode = ReadMode::kDirect;
    reader.memory_budget = at_least_a_block(options.buffer_size / 2);
    reader.block_size = side_block(reader.memory_budget, options.block_size);
    reader.blocks_in_flight = 8;
    reader.unit_cache_bytes = at_least_a_block(options.buffer_size / 16);
    return reader;
}

// kAuto reads buffered when there is nothing to sample or enough of the sample is cached.
ReadMode resolve_read_mode(ReadMode asked, std::span<const ReadRange> sample,
                           double sampled_fraction) {
    if (asked != ReadMode::kAuto)
        return asked;
    bool any_bytes = std::any_of(sample.begin(), sample.end(),
                                 [](const ReadRange& range) { return range.length > 0; });
    return !any_bytes || sampled_fraction >= kWarmThreshold ? ReadMode::kBuffered
                                                            : ReadMode::kDirect;
}

}  // namespace

DirectCopier::DirectCopier(InputFiles& inputs, std::vector<std::string> paths,
                           std::span<const ReadRange> sample, const DirectCopyOptions& options)
    : inputs_(inputs),
      options_(options),
      sampled_fraction_(options.read_mode == ReadMode::kAuto
                            ? sample_cached_fraction(paths, sample, kWarmSamples)
                            : -1.0),
      reader_(resolve_read_mode(options.read_mode, sample, sampled_fraction_) == ReadMode::kDirect
                  ? std::make_unique<DirectReader>(std::move(paths), std::vector<ReadRange>{},
                                                   reader_options(options))
                  : nullptr),
      chunk_(kMinBlock, at_least_a_block(options.buffer_size / 16)),
      staging_(kMinBlock, 2 * at_least_a_block(options.buffer_size / 16)),
      writer_(writer_options(options, reader_ != nullptr)) {}

void DirectCopier::add_reads(std::span<const ReadRange> reads) {
    if (reader_ == nullptr)
        return;  // buffered reads follow the copies as they come
    reads_.insert(reads_.end(), reads.begin(), reads.end());
    reader_->extend(reads);
}

DirectCopier::~DirectCopier() = default;

void DirectCopier::progress(std::uint64_t bytes) {
    if (options_.on_progress && !options_.on_progress(bytes))
        throw CopyStopped{};
}

std::vector<std::uint32_t> DirectCopier::copy(const RangeCopy& range) {
    std::vector<std::uint32_t> crcs(range.slots.size(), 0);
    writer_.open(range.path, range.begin, range.end, range.final_size, range.tag);
    std::uint64_t position = range.begin;
    for (const RangePiece& piece : range.pieces) {
        if (piece.offset != position)
            throw_internal_error("range pieces of '" + range.path + "' do not tile it at " +
                                 std::to_string(position));
        switch (piece.kind) {
            case RangePiece::Kind::kBytes:
                writer_.append(piece.bytes.first(static_cast<std::size_t>(piece.length)));
                progress(piece.length);
                break;
            case RangePiece::Kind::kDeferred: {
                const std::vector<std::byte> bytes = range.deferred(piece, crcs);
                if (bytes.size() != piece.length)
                    throw_internal_error("deferred bytes of '" + range.path + "' at " +
                                         std::to_string(piece.offset) + " have the wrong size");
                writer_.append(bytes);
                progress(piece.length);
                break;
            }
            case RangePiece::Kind::kSlot: {
                const SlotCopy& slot = range.slots[piece.slot];
                if (slot.offset != piece.offset || slot.length != piece.length)
                    throw_internal_error("slot piece of '" + range.path + "' does not match");
                copy_slot(slot, crcs[piece.slot]);
                break;
            }
        }
        position += piece.length;
    }
    if (position != range.end)
        throw_internal_error("range pieces of '" + range.path + "' end at " +
                             std::to_string(position));
    writer_.close_range();
    return crcs;
}

void DirectCopier::begin_extent(const SourceExtent& extent) {
    if (reader_ == nullptr)
        return;
    reading_ = next_read_++;
    if (reads_.empty() || reads_.front().file != extent.file ||
        reads_.front().offset != extent.offset || reads_.front().length != extent.length)
        throw_internal_error("direct copy: extents read out of the added order");
    reads_.pop_front();
}

std::span<const std::byte> DirectCopier::read(const SourceExtent& extent, std::uint64_t done,
                                              std::span<std::byte> into) {
    if (reader_ == nullptr) {
        inputs_.get(extent.file).read_exact(extent.offset + done, into);
        return into;
    }
    if (!piece_ || piece_used_ == piece_->bytes.size()) {
        piece_ = reader_->next();
        piece_used_ = 0;
        if (!piece_ || piece_->range != reading_ || piece_->offset != done)
            throw_internal_error("direct copy: the reader is out of step with the copy");
    }
    const std::size_t n = static_cast<std::size_t>(
        std::min<std::uint64_t>(into.size(), piece_->bytes.size() - piece_used_));
    std::span<const std::byte> bytes =
        piece_->bytes.subspan(static_cast<std::size_t>(piece_used_), n);
    piece_used_ += n;
    return bytes;
}

void DirectCopier::copy_slot(const SlotCopy& slot, std::uint32_t& crc) {
    const bool convert = slot.source_dtype != slot.output_dtype;
    const std::size_t in_item = dtype_size(slot.source_dtype);
    const std::size_t out_item = dtype_size(slot.output_dtype);
    std::uint64_t written = 0;
    CheckCursor check_cursor;
    if (!slot.replicas.empty()) {
        // Small tensors (norms, biases): buffered reads through the chunk, means converted
        // into the staging buffer.
        const std::size_t room = staging_.size() / std::max(in_item, out_item) * in_item;
        stream_replica_mean(inputs_, slot.replicas, slot.source_dtype, chunk_.span(),
                            [&](std::span<const std::byte> mean) {
                                for (std::size_t at = 0; at < mean.size(); at += room) {
                                    std::span<const std::byte> part =
                                        mean.subspan(at, std::min(room, mean.size() - at));
                                    std::span<std::byte> out =
                                        staging_.span().first(part.size() / in_item * out_item);
                                    convert_elements(slot.source_dtype, part, slot.output_dtype,
                                                     out);
                                    if (slot.want_crc)
                                        crc = crc32_update(crc, out);
                                    writer_.append(out);
                                    written += out.size();
                                    progress(out.size());
                                }
                            });
    }
    for (std::uint32_t e = 0; e < slot.extents.size(); ++e) {
        const SourceExtent& extent = slot.extents[e];
        if (extent.length % in_item != 0) {
            throw_internal_error("extent of '" + std::string(slot.name) +
                                 "' is not a whole number of elements");
        }
        begin_extent(extent);
        std::uint64_t done = 0;
        while (done < extent.length) {
            if (!convert) {
                // Straight into the writer's block.
                std::span<std::byte> space = writer_.buffer();
                space = space.first(static_cast<std::size_t>(
                    std::min<std::uint64_t>(space.size(), extent.length - done)));
                std::span<const std::byte> bytes = read(extent, done, space);
                if (bytes.data() != space.data())
                    std::memcpy(space.data(), bytes.data(), bytes.size());
                std::span<const std::byte> placed = space.first(bytes.size());
                fold_check_ranges(slot.check_ranges, piece_crcs_, e, extent.offset + done, placed,
                                  check_cursor);
                if (slot.want_crc)
                    crc = crc32_update(crc, placed);
                writer_.commit(placed.size());
                done += placed.size();
                written += placed.size();
                progress(placed.size());
                continue;
            }
            // Whole elements through the chunk, converted into the staging buffer.
            const std::uint64_t elements = std::min<std::uint64_t>(
                (extent.length - done) / in_item,
                std::min(chunk_.size() / in_item, staging_.size() / out_item));
            const std::size_t in_bytes = static_cast<std::size_t>(elements * in_item);
            std::span<std::byte> chunk = chunk_.span().first(in_bytes);
            std::size_t filled = 0;
            while (filled < in_bytes) {
                std::span<std::byte> rest = chunk.subspan(filled);
                std::span<const std::byte> bytes = read(extent, done + filled, rest);
                if (bytes.data() != rest.data())
                    std::memcpy(rest.data(), bytes.data(), bytes.size());
                filled += bytes.size();
            }
            fold_check_ranges(slot.check_ranges, piece_crcs_, e, extent.offset + done, chunk,
                              check_cursor);
            std::span<std::byte> out =
                staging_.span().first(static_cast<std::size_t>(elements * out_item));
            convert_elements(slot.source_dtype, chunk, slot.output_dtype, out);
            if (slot.want_crc)
                crc = crc32_update(crc, out);
            writer_.append(out);
            done += in_bytes;
            written += out.size();
            progress(out.size());
        }
    }
    if (written != slot.length) {
        throw_internal_error("tensor '" + std::string(slot.name) + "' filled " +
                             std::to_string(written) + " of its " + std::to_string(slot.length) +
                             " output bytes");
    }
}

std::uint32_t DirectCopier::checksum(const SourceExtent& range) {
    return checksum_range(inputs_.get(range.file), range.offset, range.length, chunk_.span(),
                          [&](std::uint64_t, std::size_t) {
                              progress(0);  // a chance to stop: signals, a failed peer
                          });
}

}  // namespace z2f::io
