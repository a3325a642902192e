#include "driver/executor.hpp"

#include <algorithm>
#include <tuple>

#include "common/crc32.hpp"
#include "common/errors.hpp"
#include "driver/output_dir.hpp"
#include "driver/task_copies.hpp"
#include "io/posix_file.hpp"

namespace z2f::driver {
namespace {

void write_regions(const io::File& file, const std::vector<run::ClippedRegion>& regions) {
    for (const run::ClippedRegion& region : regions) {
        file.write_all(region.offset, region.bytes);
    }
}

// fsync, then the final name: from here on the file is complete and --resume may trust it.
void publish(const std::string& output_dir, const run::OutputFileRecord& file, io::File& handle) {
    handle.sync();
    handle.drop_cache(0, file.layout.size);
    handle.close();
    io::rename_file(temp_path(output_dir, file.name()), final_path(output_dir, file));
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
    for (const plan::WriteTask* task : tasks_to_write(plan, target.rank)) {
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
            write_regions(file, run::clip_regions(output::crc_tail(layout, crcs), 0, layout.size));
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

void finalize_shared_file(const run::RunPlan& plan, const std::string& output_dir,
                          std::uint32_t file, const std::vector<SlotCrc>& all_crcs) {
    const run::OutputFileRecord& record = plan.files.at(file);
    const output::OutputFileLayout& layout = record.layout;
    io::File handle = io::File::open_write(temp_path(output_dir, record.name()));
    if (layout.has_crc_tail())
        write_regions(handle, run::clip_regions(
                                  output::crc_tail(layout, join_slot_crcs(record, file, all_crcs)),
                                  0, layout.size));
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
