#include "io/memory_filler.hpp"

#include <algorithm>
#include <cstring>

#include "common/errors.hpp"
#include "io/check_ranges.hpp"
#include "io/dtype_convert.hpp"
#include "io/memory_advice.hpp"
#include "io/replica_mean.hpp"

namespace z2f::io {
namespace {

constexpr std::size_t kPage = 4096;
// The most bytes read (and checksummed) at once: a chunk stays in the CPU's cache between its
// read and its CRC.
constexpr std::size_t kMostAtOnce = std::size_t{2} << 20;
constexpr std::size_t kLeastChunk = std::size_t{64} << 10;
// kAuto reads buffered from this fraction of sampled pages in the page cache up, as the copier.
constexpr double kWarmThreshold = 0.5;
constexpr std::size_t kWarmSamples = 32;

std::size_t whole_pages(std::size_t bytes) {
    return std::max(bytes / kPage * kPage, kPage);
}

// Every extent of every fill, in fill order, empty ones included: the direct reader numbers
// its pieces by these. Replicas are read by the mean, buffered, and are not among them.
std::vector<ReadRange> reads_of(std::span<const MemoryFill> fills) {
    std::vector<ReadRange> reads;
    for (const MemoryFill& fill : fills) {
        for (const SourceExtent& extent : fill.extents)
            reads.push_back({extent.file, extent.offset, extent.length});
    }
    return reads;
}

// Half of the budget in blocks of 2 MiB (a huge page, aligned_buffer.hpp) when it holds two of
// them, smaller ones otherwise; eight in flight at most.
DirectReaderOptions reader_options(const MemoryFillOptions& options) {
    DirectReaderOptions reader;
    reader.engine = options.engine;
    reader.mode = ReadMode::kDirect;
    reader.memory_budget = whole_pages(options.buffer_size / 2);
    const std::size_t two_mib = std::size_t{2} << 20;
    reader.block_size = reader.memory_budget >= 2 * two_mib
                            ? std::max(two_mib, whole_pages(reader.memory_budget / 8))
                            : whole_pages(reader.memory_budget / 2);
    reader.blocks_in_flight =
        std::clamp<std::size_t>(reader.memory_budget / reader.block_size, 1, std::size_t{8});
    reader.unit_cache_bytes = whole_pages(options.buffer_size / 16);
    return reader;
}

bool reads_direct(const MemoryFillOptions& options, const std::vector<std::string>& paths,
                  std::span<const ReadRange> reads) {
    if (options.read_mode != ReadMode::kAuto)
        return options.read_mode == ReadMode::kDirect;
    const bool any_bytes = std::any_of(reads.begin(), reads.end(),
                                       [](const ReadRange& read) { return read.length > 0; });
    return any_bytes && sample_cached_fraction(paths, reads, kWarmSamples) < kWarmThreshold;
}

}  // namespace

MemoryFiller::MemoryFiller(InputFiles& inputs, std::vector<std::string> paths,
                           std::span<const MemoryFill> fills, const MemoryFillOptions& options)
    : inputs_(inputs),
      fills_(fills),
      options_(options),
      chunk_(std::max(kLeastChunk, whole_pages(options.buffer_size / 16))) {
    std::vector<ReadRange> reads = reads_of(fills);
    if (reads_direct(options, paths, reads)) {
        reader_ = std::make_unique<DirectReader>(std::move(paths), std::move(reads),
                                                 reader_options(options));
    }
}

MemoryFiller::~MemoryFiller() = default;

void MemoryFiller::chunk_done() const {
    if (options_.after_chunk)
        options_.after_chunk();
}

void MemoryFiller::run(std::span<std::uint32_t> piece_crcs) {
    for (const MemoryFill& fill : fills_) {
        // Fresh memory: its pages in one call, not one fault each (memory_advice.hpp).
        populate_for_writing(fill.out);
        if (!fill.replicas.empty())
            fill_with_mean(fill);
        else
            fill_from_extents(fill, piece_crcs);
    }
}

void MemoryFiller::fill_with_mean(const MemoryFill& fill) {
    const std::size_t in_item = dtype_size(fill.source_dtype);
    const std::size_t out_item = dtype_size(fill.output_dtype);
    std::size_t placed = 0;
    stream_replica_mean(
        inputs_, fill.replicas, fill.source_dtype, chunk_, [&](std::span<const std::byte> mean) {
            const std::size_t bytes = mean.size() / in_item * out_item;
            if (placed + bytes > fill.out.size())
                throw_internal_error("the mean of '" + fill.name + "' overruns its memory");
            convert_elements(fill.source_dtype, mean, fill.output_dtype,
                             fill.out.subspan(placed, bytes));
            placed += bytes;
            chunk_done();
        });
    if (placed != fill.out.size())
        throw_internal_error("the mean of '" + fill.name + "' filled " + std::to_string(placed) +
                             " of " + std::to_string(fill.out.size()) + " bytes");
}

void MemoryFiller::fill_from_extents(const MemoryFill& fill, std::span<std::uint32_t> piece_crcs) {
    const bool same = !conversion_needed(fill.source_dtype, fill.output_dtype);
    const std::size_t in_item = dtype_size(fill.source_dtype);
    const std::size_t out_item = dtype_size(fill.output_dtype);
    // Whole elements: a conversion's chunk never splits one.
    const std::size_t step = same ? kMostAtOnce : chunk_.size() / in_item * in_item;
    std::uint64_t placed = 0;
    CheckCursor cursor;
    for (std::uint32_t e = 0; e < fill.extents.size(); ++e) {
        const SourceExtent& extent = fill.extents[e];
        if (extent.length % in_item != 0)
            throw_internal_error("an extent of '" + fill.name + "' splits an element");
        if (placed + extent.length / in_item * out_item > fill.out.size())
            throw_internal_error("the extents of '" + fill.name + "' overrun its memory");
        for (std::uint64_t done = 0; done < extent.length;) {
            const auto want =
                static_cast<std::size_t>(std::min<std::uint64_t>(step, extent.length - done));
            // Unconverted bytes go to their place in the caller's memory at once; converted
            // ones gather in the chunk first, since the reader may hand them over in pieces.
            std::span<std::byte> room =
                same ? fill.out.subspan(static_cast<std::size_t>(placed), want)
                     : std::span<std::byte>(chunk_).first(want);
            for (std::size_t got = 0; got < want;) {
                std::span<const std::byte> bytes = take(extent, done + got, room.subspan(got));
                if (bytes.data() != room.data() + got)
                    std::memcpy(room.data() + got, bytes.data(), bytes.size());
                got += bytes.size();
            }
            fold_check_ranges(fill.check_ranges, piece_crcs, e, extent.offset + done, room, cursor);
            if (!same) {
                std::span<std::byte> out =
                    fill.out.subspan(static_cast<std::size_t>(placed), want / in_item * out_item);
                convert_elements(fill.source_dtype, room, fill.output_dtype, out);
                placed += out.size();
            } else {
                placed += want;
            }
            done += want;
            chunk_done();
        }
        ++reading_;
    }
    if (placed != fill.out.size())
        throw_internal_error("'" + fill.name + "' filled " + std::to_string(placed) + " of " +
                             std::to_string(fill.out.size()) + " bytes");
}

std::span<const std::byte> MemoryFiller::take(const SourceExtent& extent, std::uint64_t done,
                                              std::span<std::byte> room) {
    if (reader_ == nullptr) {
        inputs_.get(extent.file).read_exact(extent.offset + done, room);
        return room;
    }
    const bool used_up = !piece_ || piece_used_ == piece_->bytes.size();
    if (used_up) {
        piece_ = reader_->next();
        piece_used_ = 0;
    }
    if (!piece_ || piece_->range != reading_ || piece_->offset + piece_used_ != done)
        throw_internal_error("memory fill: the direct reader is out of step with the fills");
    const std::size_t n = std::min(room.size(), piece_->bytes.size() - piece_used_);
    std::span<const std::byte> bytes = piece_->bytes.subspan(piece_used_, n);
    piece_used_ += n;
    return bytes;
}

std::uint32_t MemoryFiller::checksum(const SourceExtent& range) {
    return checksum_range(inputs_.get(range.file), range.offset, range.length, chunk_,
                          [&](std::uint64_t, std::size_t) { chunk_done(); });
}

}  // namespace z2f::io
