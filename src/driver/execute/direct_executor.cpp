#include "driver/execute/direct_executor.hpp"

#include <algorithm>
#include <deque>
#include <unordered_map>

#include "common/errors.hpp"
#include "driver/destination/inspection.hpp"
#include "driver/execute/task_copies.hpp"
#include "driver/execute/task_ranges.hpp"
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

// The rank's tasks in order, their parts and copies made a few tasks ahead of the copy: the
// copier's reader reads ahead along them, and a rank holds the extents of those tasks only
// (a row-parallel weight is one extent per row and TP rank: all of a rank's tasks at once
// would be ~3 GB for a 405B model at TP = 8 on one rank).
class TaskStream {
  public:
    TaskStream(const run::RunPlan& plan, const std::vector<const plan::WriteTask*>& mine,
               InputCheck* check, io::DirectCopier& copier)
        : plan_(plan), mine_(mine), check_(check), copier_(copier) {}

    // Task i, called for i = 0, 1, ... in turn (task i - 1 is done), with the reads of the
    // tasks after it handed to the copier as far as kReadAhead bytes of them reach, and at
    // least the next task's.
    DirectTask& take(std::size_t i) {
        if (i > 0) {
            bytes_made_ -= ahead_.front().task->bytes;
            ahead_.pop_front();
        }
        while (made_ < mine_.size() &&
               (made_ <= i + 1 || bytes_made_ - ahead_.front().task->bytes < kReadAhead)) {
            make(made_++);
        }
        return ahead_.front();
    }

  private:
    // Enough read ahead to keep the reader's requests in flight past a task's end.
    static constexpr std::uint64_t kReadAhead = std::uint64_t{64} << 20;

    void make(std::size_t i) {
        DirectTask work;
        work.task = mine_[i];
        work.parts = run::slot_parts(plan_, *work.task);
        work.copies = slot_copies(plan_, *work.task, work.parts, check_);
        copier_.add_reads(task_reads(work.copies));
        bytes_made_ += work.task->bytes;
        ahead_.push_back(std::move(work));
    }

    const run::RunPlan& plan_;
    const std::vector<const plan::WriteTask*>& mine_;
    InputCheck* check_;
    io::DirectCopier& copier_;
    std::deque<DirectTask> ahead_;  // made, not yet done; the front is being copied
    std::size_t made_ = 0;          // tasks made so far
    std::uint64_t bytes_made_ = 0;  // output bytes of the tasks in ahead_
};

// What a range piece holds, kept after its copy to name what a mismatch hits (--verify).
struct PieceLabel {
    std::uint64_t offset = 0;
    std::uint64_t length = 0;
    io::RangePiece::Kind kind = io::RangePiece::Kind::kBytes;
    std::string tensor;  // kSlot
};

// Builds task i's range and hands it to the copier: every task's byte range of the rank,
// streamed through one copier, written (into the file's temp name) or compared (with the file
// under its final name). `report` (writing) gets shared-file CRCs; `labels` (comparing) what
// each range holds.
class RangeStream {
  public:
    RangeStream(const run::RunPlan& plan, const RankTarget& target,
                const std::vector<const plan::WriteTask*>& mine, InputCheck* check,
                io::DirectCopier& copier, bool compare)
        : plan_(plan),
          target_(target),
          compare_(compare),
          copier_(copier),
          tasks_(plan, mine, check, copier) {}

    // Copies task i (tasks in order); returns its slot CRCs.
    std::vector<std::uint32_t> copy(std::size_t i, ExecuteReport* report,
                                    std::vector<std::vector<PieceLabel>>* labels) {
        const DirectTask& work = tasks_.take(i);
        const plan::WriteTask& task = *work.task;
        const run::OutputFileRecord& record = plan_.files[task.file];
        const output::OutputFileLayout& layout = record.layout;
        const std::vector<output::TailPlacement> tail = output::crc_tail_placements(layout);
        const bool shared = record.is_shared();
        if (!shared && task.slot_begin != 0)
            throw_internal_error("the one task of '" + record.name() + "' skips slots");
        io::RangeCopy range;
        range.path = compare_ ? final_path(target_.output_dir, record)
                              : temp_path(target_.output_dir, record.name());
        range.begin = task.begin;
        range.end = task.end;
        if (task.end == layout.size)
            range.final_size = layout.size;
        range.tag = i;
        range.pieces = range_pieces(layout, task, work.parts, tail);
        range.slots = work.copies;
        range.deferred = [&](const io::RangePiece& piece, std::span<const std::uint32_t> crcs) {
            if (shared)
                return shared_tail_bytes(range.path, piece);
            // One task writes all the slots, in order: its CRCs are indexed like the layout's.
            return output::crc_tail_bytes(layout, tail.at(static_cast<std::size_t>(piece.tail)),
                                          crcs);
        };
        if (labels != nullptr) {
            std::vector<PieceLabel>& mine = labels->emplace_back();
            for (const io::RangePiece& piece : range.pieces) {
                mine.push_back({piece.offset, piece.length, piece.kind,
                                piece.kind == io::RangePiece::Kind::kSlot
                                    ? std::string(range.slots[piece.slot].name)
                                    : std::string()});
            }
        }
        if (report != nullptr)
            report->temp_files.push_back(range.path);
        std::vector<std::uint32_t> crcs = copier_.copy(range);
        if (shared && report != nullptr)
            note_shared_crcs(task, layout, work.parts, crcs, *report);
        return crcs;
    }

  private:
    // The CRC-dependent bytes of a file several ranks write are known only to its lead, once
    // every rank's CRCs are: written as zeros, patched by the lead (finalize_shared_file);
    // compared by the lead too (verify_shared_tails), so here they are the file's own bytes.
    std::vector<std::byte> shared_tail_bytes(const std::string& path,
                                             const io::RangePiece& piece) const {
        std::vector<std::byte> bytes(piece.length, std::byte{0});
        if (compare_)
            io::File::open_read(path).read_exact(piece.offset, bytes);
        return bytes;
    }

    const run::RunPlan& plan_;
    const RankTarget& target_;
    bool compare_;
    io::DirectCopier& copier_;
    TaskStream tasks_;
};

// One copier for the rank's tasks, sampling its reads to tell warm inputs from cold.
io::DirectCopier make_copier(const run::RunPlan& plan,
                             const std::vector<const plan::WriteTask*>& mine,
                             io::InputFiles& inputs, const io::DirectCopyOptions& options) {
    std::vector<std::string> paths;
    for (const InputFile& input : plan.tensors.inputs)
        paths.push_back(input.path);
    const std::vector<io::ReadRange> sample = options.read_mode == ReadMode::kAuto
                                                  ? read_spans(plan, mine)
                                                  : std::vector<io::ReadRange>{};
    return io::DirectCopier(inputs, std::move(paths), sample, options);
}

}  // namespace

void execute_tasks(const run::RunPlan& plan, const RankTarget& target, io::InputFiles& inputs,
                   const io::DirectCopyOptions& options, ExecuteReport& report, InputCheck* check) {
    const std::vector<const plan::WriteTask*> mine = tasks_to_write(plan, target.rank);
    io::DirectCopier copier = make_copier(plan, mine, inputs, options);
    if (check != nullptr) {
        check->piece_crcs.assign(check->plan.pieces.size(), 0);
        copier.collect_piece_crcs(check->piece_crcs);
    }

    // A file written by one task gets its final name once the writer says it is on disk.
    auto publish_durable = [&](const std::vector<std::uint64_t>& tags) {
        for (std::uint64_t tag : tags) {
            const plan::WriteTask& task = *mine.at(tag);
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
        RangeStream ranges(plan, target, mine, check, copier, false);
        for (std::size_t i = 0; i < mine.size(); ++i) {
            ranges.copy(i, &report, nullptr);
            publish_durable(copier.take_durable());
        }
        copier.drain();
        publish_durable(copier.take_durable());
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

std::vector<VerifyFinding> verify_tasks(const run::RunPlan& plan, const RankTarget& target,
                                        io::InputFiles& inputs, io::DirectCopyOptions options,
                                        InputCheck* check, std::vector<SlotCrc>& shared_crcs) {
    options.compare = true;
    const std::vector<const plan::WriteTask*> mine = tasks_to_write(plan, target.rank);
    io::DirectCopier copier = make_copier(plan, mine, inputs, options);
    if (check != nullptr) {
        check->piece_crcs.assign(check->plan.pieces.size(), 0);
        copier.collect_piece_crcs(check->piece_crcs);
    }
    std::vector<std::vector<PieceLabel>> labels;
    ExecuteReport crcs;  // the CRCs of shared files' slots, for their leads
    RangeStream ranges(plan, target, mine, check, copier, true);
    for (std::size_t i = 0; i < mine.size(); ++i)
        ranges.copy(i, &crcs, &labels);
    copier.drain();
    shared_crcs = std::move(crcs.shared_crcs);

    // Each mismatch named by the pieces it hits, once per file and thing.
    std::vector<VerifyFinding> findings;
    auto add = [&](std::uint32_t file, std::string what) {
        for (const VerifyFinding& finding : findings) {
            if (finding.file == file && finding.what == what)
                return;
        }
        findings.push_back({file, std::move(what)});
    };
    for (const io::DirectWriter::Mismatch& mismatch : copier.take_mismatches()) {
        const std::uint32_t file = mine.at(mismatch.tag)->file;
        for (const PieceLabel& piece : labels.at(mismatch.tag)) {
            const std::uint64_t from = std::max(piece.offset, mismatch.begin);
            const std::uint64_t to = std::min(piece.offset + piece.length, mismatch.end);
            if (from >= to)
                continue;
            switch (piece.kind) {
                case io::RangePiece::Kind::kSlot:
                    add(file, "tensor '" + piece.tensor + "' differs from the checkpoint");
                    break;
                case io::RangePiece::Kind::kBytes:
                    add(file, "header bytes at offset " + std::to_string(from) + " differ");
                    break;
                case io::RangePiece::Kind::kDeferred:
                    add(file, "zip directory bytes at offset " + std::to_string(from) + " differ");
                    break;
            }
        }
    }
    if (check != nullptr)
        read_extra_pieces(copier, target.rank, *check, plan.tensors.records);
    return findings;
}

}  // namespace z2f::driver
