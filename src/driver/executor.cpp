#include "driver/executor.hpp"

#include <algorithm>
#include <tuple>

#include "common/crc32.hpp"
#include "common/errors.hpp"
#include "driver/output_dir.hpp"
#include "io/posix_file.hpp"

namespace z2f::driver {
namespace {

// The copies of a task's slot parts; `parts` owns the extents the copies point into.
std::vector<io::SlotCopy> slot_copies(const run::RunPlan& plan, const plan::WriteTask& task,
                                      const std::vector<run::SlotPart>& parts,
                                      const InputCheck* check) {
    const output::OutputFileLayout& layout = plan.files[task.file].layout;
    std::vector<io::SlotCopy> copies;
    for (const run::SlotPart& part : parts) {
        const output::TensorSlot& slot = layout.slots[part.slot];
        const plan::PlannedTensor& source = plan.source_of(slot.tensor);
        io::SlotCopy copy;
        copy.extents = part.extents;
        copy.replicas = part.replicas;
        copy.source_dtype = source.source_dtype;
        copy.output_dtype = source.output_dtype;
        copy.offset = part.offset;
        copy.length = part.length;
        copy.want_crc = layout.has_crc_tail();
        copy.name = plan.tensors.tensors[slot.tensor].name;
        if (check != nullptr) {
            if (const std::vector<CrcRange>* ranges =
                    check->plan.ranges_of(plan.index_of(task), part.slot))
                copy.check_ranges = *ranges;
        }
        copies.push_back(copy);
    }
    return copies;
}

void write_regions(const io::File& file, const std::vector<output::FixedRegion>& regions) {
    for (const output::FixedRegion& region : regions) {
        file.write_all(region.offset, region.bytes);
    }
}

void write_regions(const io::File& file, const std::vector<run::ClippedRegion>& regions) {
    for (const run::ClippedRegion& region : regions) {
        file.write_all(region.offset, region.bytes);
    }
}

std::string final_path(const std::string& output_dir, const run::OutputFileRecord& file) {
    return output_dir + "/" + file.name();
}

// fsync, then the final name: from here on the file is complete and --resume may trust it.
void publish(const std::string& output_dir, const run::OutputFileRecord& file, io::File& handle) {
    handle.sync();
    handle.drop_cache(0, file.layout.size);
    handle.close();
    io::rename_file(temp_path(output_dir, file.name()), final_path(output_dir, file));
}

// This rank's check pieces that no copy reads (either copier's checksum()).
template <typename Copier>
void read_extra_pieces(Copier& copier, std::uint32_t rank, InputCheck& check,
                       const std::vector<InputRecord>& records) {
    for (std::size_t p = 0; p < check.plan.pieces.size(); ++p) {
        const run::CheckPiece& piece = check.plan.pieces[p];
        if (piece.rank == rank && piece.extra_read) {
            check.piece_crcs[p] =
                copier.checksum({records.at(piece.record).file, piece.offset, piece.length});
        }
    }
}

}  // namespace

void note_shared_crcs(const plan::WriteTask& task, const output::OutputFileLayout& layout,
                      const std::vector<run::SlotPart>& parts, std::span<const std::uint32_t> crcs,
                      ExecuteReport& report) {
    if (!layout.has_crc_tail())
        return;
    for (std::size_t i = 0; i < parts.size(); ++i) {
        report.shared_crcs.push_back(
            {task.file, parts[i].slot, parts[i].skip, parts[i].length, crcs[i]});
    }
}

std::vector<std::uint32_t> join_slot_crcs(const run::OutputFileRecord& record, std::uint32_t file,
                                          const std::vector<SlotCrc>& all_crcs) {
    const output::OutputFileLayout& layout = record.layout;
    std::vector<const SlotCrc*> mine;
    for (const SlotCrc& entry : all_crcs) {
        if (entry.file == file)
            mine.push_back(&entry);
    }
    std::sort(mine.begin(), mine.end(), [](const SlotCrc* a, const SlotCrc* b) {
        return std::tie(a->slot, a->skip) < std::tie(b->slot, b->skip);
    });
    // Each slot's parts must tile it in order: their join is the slot's CRC.
    std::vector<std::uint32_t> crcs(layout.slots.size(), 0);
    std::vector<std::uint64_t> covered(layout.slots.size(), 0);
    for (const SlotCrc* part : mine) {
        if (part->slot >= crcs.size() || part->skip != covered[part->slot])
            throw_internal_error("slot CRC parts of '" + record.name() + "' do not tile slot " +
                                 std::to_string(part->slot));
        crcs[part->slot] = crc32_join(crcs[part->slot], part->crc, part->length);
        covered[part->slot] += part->length;
    }
    for (std::size_t s = 0; s < layout.slots.size(); ++s) {
        if (covered[s] != layout.slots[s].length ||
            (layout.slots[s].length == 0 &&
             std::none_of(mine.begin(), mine.end(),
                          [&](const SlotCrc* p) { return p->slot == s; })))
            throw_internal_error("missing slot CRCs for '" + record.name() + "'");
    }
    return crcs;
}

void execute_tasks(const run::RunPlan& plan, const RankTarget& target, io::InputFiles& inputs,
                   const io::CopyOptions& copy, ExecuteReport& report, InputCheck* check) {
    io::ExtentCopier copier(inputs, copy);
    if (check != nullptr) {
        check->piece_crcs.assign(check->plan.pieces.size(), 0);
        copier.collect_piece_crcs(check->piece_crcs);
    }
    // Smallest tasks first: if the run is interrupted (time limit, full disk), the most files
    // are complete and --resume has the least left to do.
    std::vector<const plan::WriteTask*> mine;
    for (const plan::WriteTask* task : plan.tasks_of(target.rank)) {
        if (!plan.files[task->file].skip)
            mine.push_back(task);
    }
    std::stable_sort(
        mine.begin(), mine.end(),
        [](const plan::WriteTask* a, const plan::WriteTask* b) { return a->bytes < b->bytes; });
    for (const plan::WriteTask* task : mine) {
        const run::OutputFileRecord& record = plan.files[task->file];
        const output::OutputFileLayout& layout = record.layout;
        const std::string temp = temp_path(target.output_dir, record.name());
        io::File file = io::File::open_write(temp);
        report.temp_files.push_back(temp);
        file.truncate(layout.size);
        write_regions(file, run::clip_regions(layout.fixed, task->begin, task->end));
        const std::vector<run::SlotPart> parts = run::slot_parts(plan, *task);
        std::vector<io::SlotCopy> copies = slot_copies(plan, *task, parts, check);
        std::vector<std::uint32_t> crcs = copier.copy(file, copies);
        if (!record.is_shared()) {
            write_regions(file, output::crc_tail(layout, crcs));
            publish(target.output_dir, record, file);
            report.completed_files.push_back(task->file);
            report.temp_files.pop_back();
        } else {
            file.sync();
            note_shared_crcs(*task, layout, parts, crcs, report);
        }
    }
    if (check != nullptr)
        read_extra_pieces(copier, target.rank, *check, plan.tensors.records);
}

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
    // Smallest tasks first, as execute_tasks does.
    std::vector<const plan::WriteTask*> mine;
    for (const plan::WriteTask* task : plan.tasks_of(target.rank)) {
        if (!plan.files[task->file].skip)
            mine.push_back(task);
    }
    std::stable_sort(
        mine.begin(), mine.end(),
        [](const plan::WriteTask* a, const plan::WriteTask* b) { return a->bytes < b->bytes; });

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

void finalize_shared_file(const run::RunPlan& plan, const std::string& output_dir,
                          std::uint32_t file, const std::vector<SlotCrc>& all_crcs) {
    const run::OutputFileRecord& record = plan.files.at(file);
    const output::OutputFileLayout& layout = record.layout;
    io::File handle = io::File::open_write(temp_path(output_dir, record.name()));
    if (layout.has_crc_tail())
        write_regions(handle, output::crc_tail(layout, join_slot_crcs(record, file, all_crcs)));
    publish(output_dir, record, handle);
}

void remove_temp_files(const run::RunPlan& plan, const RankTarget& target,
                       const ExecuteReport& report) noexcept {
    std::vector<std::string> paths = report.temp_files;
    for (std::uint32_t f = 0; f < plan.files.size(); ++f) {
        // Leads of shared files also clean the temp files other ranks opened.
        if (plan.is_shared(f) && plan.lead_of(f).rank == target.rank)
            paths.push_back(temp_path(target.output_dir, plan.files[f].name()));
    }
    for (const std::string& path : paths) {
        try {
            io::remove_file(path);
        } catch (...) {
            // Best effort: a temp name never looks like a final output.
        }
    }
}

std::vector<VerifyFinding> verify_tasks(const run::RunPlan& plan, const RankTarget& target,
                                        io::InputFiles& inputs, const io::CopyOptions& copy,
                                        InputCheck* check) {
    io::CopyOptions options = copy;
    options.compare = true;
    options.backend = copy.backend == IoBackend::kCopyFileRange ? IoBackend::kPread : copy.backend;
    io::ExtentCopier copier(inputs, options);
    if (check != nullptr) {
        check->piece_crcs.assign(check->plan.pieces.size(), 0);
        copier.collect_piece_crcs(check->piece_crcs);
    }
    std::vector<VerifyFinding> mismatches;
    for (const plan::WriteTask* task : plan.tasks_of(target.rank)) {
        const run::OutputFileRecord& record = plan.files[task->file];
        if (record.skip)
            continue;
        const output::OutputFileLayout& layout = record.layout;
        io::File file = io::File::open_read(final_path(target.output_dir, record));
        if (file.size() != layout.size) {
            mismatches.push_back({task->file, "size " + std::to_string(file.size()) +
                                                  ", expected " + std::to_string(layout.size)});
            continue;
        }
        auto check_regions = [&](const std::vector<run::ClippedRegion>& regions, const char* what) {
            for (const run::ClippedRegion& region : regions) {
                std::vector<std::byte> actual(region.bytes.size());
                file.read_exact(region.offset, actual);
                if (!std::equal(actual.begin(), actual.end(), region.bytes.begin())) {
                    mismatches.push_back({task->file, std::string(what) + " bytes at offset " +
                                                          std::to_string(region.offset) +
                                                          " differ"});
                }
            }
        };
        check_regions(run::clip_regions(layout.fixed, task->begin, task->end), "header");
        const std::vector<run::SlotPart> parts = run::slot_parts(plan, *task);
        std::vector<io::SlotCopy> copies = slot_copies(plan, *task, parts, check);
        io::ExtentCopier::Comparison result = copier.compare(file, copies);
        for (std::size_t i = 0; i < copies.size(); ++i) {
            if (result.mismatched[i]) {
                mismatches.push_back({task->file, "tensor '" + std::string(copies[i].name) +
                                                      "' differs from the checkpoint"});
            }
        }
        if (!record.is_shared()) {
            check_regions(run::clip_regions(output::crc_tail(layout, result.crcs), 0, layout.size),
                          "zip directory");
        }
    }
    if (check != nullptr)
        read_extra_pieces(copier, target.rank, *check, plan.tensors.records);
    return mismatches;
}

}  // namespace z2f::driver
