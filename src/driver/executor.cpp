#include "driver/executor.hpp"

#include <algorithm>

#include "common/errors.hpp"
#include "driver/output_dir.hpp"
#include "io/posix_file.hpp"

namespace z2f::driver {
namespace {

std::vector<io::SlotCopy> slot_copies(const run::RunPlan& plan,
                                      const output::OutputFileLayout& layout,
                                      const plan::WriteTask& task, const InputCheck* check) {
    std::vector<io::SlotCopy> copies;
    for (std::uint32_t s = task.slot_begin; s < task.slot_end; ++s) {
        const output::TensorSlot& slot = layout.slots[s];
        const plan::PlannedTensor& source = plan.source_of(slot.tensor);
        io::SlotCopy copy;
        copy.extents = source.extents;
        copy.source_dtype = source.source_dtype;
        copy.output_dtype = source.output_dtype;
        copy.offset = slot.offset;
        copy.length = slot.length;
        copy.want_crc = layout.has_crc_tail();
        copy.name = plan.tensors.tensors[slot.tensor].name;
        if (check != nullptr) {
            if (const std::vector<CrcRange>* ranges = check->plan.ranges_of(task.file, s))
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

// This rank's check pieces that no copy reads.
void read_extra_pieces(io::ExtentCopier& copier, std::uint32_t rank, InputCheck& check,
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
        if (task->lead) {
            write_regions(file, layout.fixed);
        }
        std::vector<io::SlotCopy> copies = slot_copies(plan, layout, *task, check);
        std::vector<std::uint32_t> crcs = copier.copy(file, copies);
        if (!record.is_shared()) {
            write_regions(file, output::crc_tail(layout, crcs));
            publish(target.output_dir, record, file);
            report.completed_files.push_back(task->file);
            report.temp_files.pop_back();
        } else {
            file.sync();
            if (layout.has_crc_tail()) {
                for (std::size_t i = 0; i < crcs.size(); ++i) {
                    report.shared_crcs.push_back(
                        {task->file, task->slot_begin + static_cast<std::uint32_t>(i), crcs[i]});
                }
            }
        }
    }
    if (check != nullptr)
        read_extra_pieces(copier, target.rank, *check, plan.tensors.records);
}

void finalize_shared_file(const run::RunPlan& plan, const std::string& output_dir,
                          std::uint32_t file, const std::vector<SlotCrc>& all_crcs) {
    const run::OutputFileRecord& record = plan.files.at(file);
    const output::OutputFileLayout& layout = record.layout;
    io::File handle = io::File::open_write(temp_path(output_dir, record.name()));
    if (layout.has_crc_tail()) {
        std::vector<std::uint32_t> crcs(layout.slots.size(), 0);
        std::vector<bool> seen(layout.slots.size(), false);
        for (const SlotCrc& entry : all_crcs) {
            if (entry.file == file) {
                crcs.at(entry.slot) = entry.crc;
                seen.at(entry.slot) = true;
            }
        }
        if (std::find(seen.begin(), seen.end(), false) != seen.end()) {
            throw_internal_error("missing slot CRCs for '" + record.name() + "'");
        }
        write_regions(handle, output::crc_tail(layout, crcs));
    }
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
        auto check_regions = [&](const std::vector<output::FixedRegion>& regions,
                                 const char* what) {
            for (const output::FixedRegion& region : regions) {
                std::vector<std::byte> actual(region.bytes.size());
                file.read_exact(region.offset, actual);
                if (actual != region.bytes) {
                    mismatches.push_back({task->file, std::string(what) + " bytes at offset " +
                                                          std::to_string(region.offset) +
                                                          " differ"});
                }
            }
        };
        if (task->lead) {
            check_regions(layout.fixed, "header");
        }
        std::vector<io::SlotCopy> copies = slot_copies(plan, layout, *task, check);
        io::ExtentCopier::Comparison result = copier.compare(file, copies);
        for (std::size_t i = 0; i < copies.size(); ++i) {
            if (result.mismatched[i]) {
                mismatches.push_back({task->file, "tensor '" + std::string(copies[i].name) +
                                                      "' differs from the checkpoint"});
            }
        }
        if (task->lead && !record.is_shared()) {
            check_regions(output::crc_tail(layout, result.crcs), "zip directory");
        }
    }
    if (check != nullptr)
        read_extra_pieces(copier, target.rank, *check, plan.tensors.records);
    return mismatches;
}

}  // namespace z2f::driver
