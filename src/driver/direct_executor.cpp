#include "driver/direct_executor.hpp"

#include <algorithm>

#include "common/errors.hpp"
#include "driver/output_dir.hpp"
#include "driver/task_copies.hpp"
#include "io/posix_file.hpp"

namespace z2f::driver {
namespace {

// One task of this rank as the direct engine runs it: its slot parts (which own the extents
// the copies point into) and the copies.
struct DirectTask {
    const plan::WriteTask* task = nullptr;
    std::vector<run::SlotPart> parts;
    std::vector<io::SlotCopy> copies;
};

// The pieces of a task's range in file order: the fixed regions, the slot parts and the
// CRC-dependent regions of torch zip files (clipped to the range; a shared file's are written
// as zeros here and by its lead once every CRC is known).
std::vector<io::RangePiece> range_pieces(const output::OutputFileLayout& layout,
                                         const DirectTask& work,
                                         const std::vector<output::TailPlacement>& tail) {
    const plan::WriteTask& task = *work.task;
    std::vector<io::RangePiece> pieces;
    for (const run::ClippedRegion& region : run::clip_regions(layout.fixed, task.begin, task.end)) {
        io::RangePiece piece;
        piece.kind = io::RangePiece::Kind::kBytes;
        piece.offset = region.offset;
        piece.length = region.bytes.size();
        piece.bytes = region.bytes;
        pieces.push_back(piece);
    }
    for (std::size_t i = 0; i < work.parts.size(); ++i) {
        io::RangePiece piece;
        piece.kind = io::RangePiece::Kind::kSlot;
        piece.offset = work.parts[i].offset;
        piece.length = work.parts[i].length;
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

// Streams every task's range through the copier, publishing files as they reach the disk.
template <typename Publish>
void write_ranges(const run::RunPlan& plan, const RankTarget& target,
                  const std::vector<DirectTask>& work, io::DirectCopier& copier,
                  ExecuteReport& report, Publish& publish_durable) {
    for (std::size_t i = 0; i < work.size(); ++i) {
        const plan::WriteTask& task = *work[i].task;
        const run::OutputFileRecord& record = plan.files[task.file];
        const output::OutputFileLayout& layout = record.layout;
        const std::vector<output::TailPlacement> tail = output::crc_tail_placements(layout);
        io::RangeCopy range;
        range.path = temp_path(target.output_dir, record.name());
        range.begin = task.begin;
        range.end = task.end;
        if (task.end == layout.size)
            range.final_size = layout.size;
        range.tag = i;
        range.pieces = range_pieces(layout, work[i], tail);
        range.slots = work[i].copies;
        const bool shared = record.is_shared();
        if (!shared && task.slot_begin != 0)
            throw_internal_error("the one task of '" + record.name() + "' skips slots");
        range.deferred = [&](const io::RangePiece& piece, std::span<const std::uint32_t> crcs) {
            if (shared)
                return std::vector<std::byte>(piece.length, std::byte{0});
            // One task writes all the slots, in order: its CRCs are indexed like the layout's.
            return output::crc_tail_bytes(layout, tail.at(static_cast<std::size_t>(piece.tail)),
                                          crcs);
        };
        report.temp_files.push_back(range.path);
        std::vector<std::uint32_t> crcs = copier.copy(range);
        if (shared)
            note_shared_crcs(task, layout, work[i].parts, crcs, report);
        publish_durable(copier.take_durable());
    }
    copier.drain();
    publish_durable(copier.take_durable());
}

}  // namespace

void execute_tasks_direct(const run::RunPlan& plan, const RankTarget& target,
                          io::InputFiles& inputs, const io::DirectCopyOptions& options,
                          ExecuteReport& report, InputCheck* check) {
    const std::vector<const plan::WriteTask*> mine = tasks_to_write(plan, target.rank);

    // Every task's parts and copies first: the direct reader reads ahead along all of them.
    std::vector<DirectTask> work(mine.size());
    std::vector<io::ReadRange> reads;
    for (std::size_t i = 0; i < mine.size(); ++i) {
        work[i].task = mine[i];
        work[i].parts = run::slot_parts(plan, *mine[i]);
        work[i].copies = slot_copies(plan, *mine[i], work[i].parts, check);
        for (const io::SlotCopy& copy : work[i].copies) {
            for (const SourceExtent& extent : copy.extents)
                reads.push_back({extent.file, extent.offset, extent.length});
        }
    }
    std::vector<std::string> paths;
    for (const InputFile& input : plan.tensors.inputs)
        paths.push_back(input.path);
    io::DirectCopier copier(inputs, std::move(paths), std::move(reads), options);
    if (check != nullptr) {
        check->piece_crcs.assign(check->plan.pieces.size(), 0);
        copier.collect_piece_crcs(check->piece_crcs);
    }

    // A file written by one task gets its final name once the writer says it is on disk.
    auto publish_durable = [&](const std::vector<std::uint64_t>& tags) {
        for (std::uint64_t tag : tags) {
            const plan::WriteTask& task = *work.at(tag).task;
            const run::OutputFileRecord& record = plan.files[task.file];
            if (record.is_shared())
                continue;  // its lead renames it once every rank agreed
            const std::string temp = temp_path(target.output_dir, record.name());
            io::rename_file(temp, final_path(target.output_dir, record));
            report.completed_files.push_back(task.file);
            std::erase(report.temp_files, temp);
        }
    };

    try {
        write_ranges(plan, target, work, copier, report, publish_durable);
    } catch (...) {
        // Files already on disk are complete: they keep their final names for --resume.
        try {
            publish_durable(copier.settle());
        } catch (...) {
            // A failed rename leaves a temp file, removed with the others.
        }
        throw;
    }
    if (check != nullptr)
        read_extra_pieces(copier, target.rank, *check, plan.tensors.records);
}

}  // namespace z2f::driver
