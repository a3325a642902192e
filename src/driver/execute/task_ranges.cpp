#include "driver/execute/task_ranges.hpp"

#include <algorithm>
#include <unordered_map>

namespace z2f::driver {

// The pieces of a task's range in file order: the fixed regions, the slot parts and the
// CRC-dependent regions of torch zip files (clipped to the range; a shared file's are written
// as zeros here and by its lead once every CRC is known).
std::vector<io::RangePiece> range_pieces(const output::OutputFileLayout& layout,
                                         const plan::WriteTask& task,
                                         const std::vector<run::SlotPart>& parts,
                                         const std::vector<output::TailPlacement>& tail) {
    std::vector<io::RangePiece> pieces;
    for (const run::ClippedRegion& region : run::clip_regions(layout.fixed, task.begin, task.end)) {
        io::RangePiece piece;
        piece.kind = io::RangePiece::Kind::kBytes;
        piece.offset = region.offset;
        piece.length = region.bytes.size();
        piece.bytes = region.bytes;
        pieces.push_back(piece);
    }
    for (std::size_t i = 0; i < parts.size(); ++i) {
        io::RangePiece piece;
        piece.kind = io::RangePiece::Kind::kSlot;
        piece.offset = parts[i].offset;
        piece.length = parts[i].length;
        piece.slot = i;
        pieces.push_back(piece);
    }
    for (std::size_t t = 0; t < tail.size(); ++t) {
        const std::uint64_t from = std::max(tail[t].offset, task.begin);
        const std::uint64_t to = std::min(tail[t].offset + tail[t].length, task.end);
        if (to <= from)
            continue;
        io::RangePiece piece;
        piece.kind = io::RangePiece::Kind::kDeferred;
        piece.offset = from;
        piece.length = to - from;
        piece.tail = static_cast<std::int64_t>(t);
        pieces.push_back(piece);
    }
    // Slots before the fixed bytes at the same offset (an empty slot where a header starts).
    std::stable_sort(
        pieces.begin(), pieces.end(), [](const io::RangePiece& a, const io::RangePiece& b) {
            return a.offset < b.offset || (a.offset == b.offset && a.length == 0 && b.length != 0);
        });
    return pieces;
}

// The reads of a task's copies, in copy order.
std::vector<io::ReadRange> task_reads(const std::vector<io::SlotCopy>& copies) {
    std::vector<io::ReadRange> reads;
    for (const io::SlotCopy& copy : copies) {
        for (const SourceExtent& extent : copy.extents)
            reads.push_back({extent.file, extent.offset, extent.length});
    }
    return reads;
}

// The bytes each of the rank's tasks reads, as one span per task, slot and file (the rows of
// a row-parallel weight's shard are one span): what kAuto samples to tell warm from cold,
// without keeping every extent. The parts are made one task at a time and dropped.
std::vector<io::ReadRange> read_spans(const run::RunPlan& plan,
                                      const std::vector<const plan::WriteTask*>& mine) {
    std::vector<io::ReadRange> spans;
    std::unordered_map<std::uint32_t, std::size_t> span_of_file;  // within the current part
    for (const plan::WriteTask* task : mine) {
        for (const run::SlotPart& part : run::slot_parts(plan, *task)) {
            span_of_file.clear();
            for (const SourceExtent& extent : part.extents) {
                if (extent.length == 0)
                    continue;
                const auto [at, added] = span_of_file.try_emplace(extent.file, spans.size());
                if (added) {
                    spans.push_back({extent.file, extent.offset, extent.length});
                    continue;
                }
                io::ReadRange& span = spans[at->second];
                const std::uint64_t begin = std::min(span.offset, extent.offset);
                const std::uint64_t end =
                    std::max(span.offset + span.length, extent.offset + extent.length);
                span.offset = begin;
                span.length = end - begin;
            }
        }
    }
    return spans;
}

}  // namespace z2f::driver
