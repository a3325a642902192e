#include "driver/executor.hpp"

#include <algorithm>

#include "driver/output_dir.hpp"
#include "io/posix_file.hpp"
#include "output/torch_bin_layout.hpp"
#include "zero2fp32/error.hpp"

namespace z2f::driver {
namespace {

std::vector<io::SlotCopy> slot_copies(const ExecuteContext& context,
                                      const output::OutputFileLayout& layout,
                                      const plan::WriteTask& task) {
    std::vector<io::SlotCopy> copies;
    for (std::uint32_t s = task.slot_begin; s < task.slot_end; ++s) {
        const output::TensorSlot& slot = layout.slots[s];
        copies.push_back(
            {&slot_source(*context.plan, slot.tensor), slot.offset, layout.needs_slot_crcs()});
    }
    return copies;
}

void write_regions(const io::File& file, const std::vector<output::FixedRegion>& regions) {
    for (const output::FixedRegion& region : regions) {
        file.write_all(region.offset, region.bytes);
    }
}

std::string final_path(const ExecuteContext& context, std::uint32_t file) {
    return context.output_dir + "/" + context.outputs->files[file].name;
}

// fsync, then the final name: from here on the file is complete and --resume may trust it.
void publish(const ExecuteContext& context, std::uint32_t file, io::File& handle) {
    handle.sync();
    handle.drop_cache(0, (*context.layouts)[file].size);
    handle.close();
    io::rename_file(temp_path(context.output_dir, context.outputs->files[file].name),
                    final_path(context, file));
}

}  // namespace

const plan::PlannedTensor& slot_source(const plan::TensorPlan& plan, std::uint32_t tensor) {
    const plan::PlannedTensor* source = &plan.tensors.at(tensor);
    if (source->is_alias()) {
        source = &plan.tensors.at(static_cast<std::size_t>(source->alias_of));
    }
    return *source;
}

void execute_tasks(const ExecuteContext& context, io::InputFiles& inputs,
                   const io::CopyOptions& copy, ExecuteReport& report) {
    io::ExtentCopier copier(inputs, copy);
    const plan::Ownership& ownership = *context.ownership;
    // Smallest tasks first: if the run is interrupted (time limit, full disk), the most files
    // are complete and --resume has the least left to do.
    std::vector<const plan::WriteTask*> mine;
    for (const plan::WriteTask& task : ownership.tasks) {
        if (static_cast<int>(task.rank) == context.rank && !(*context.skip)[task.file]) {
            mine.push_back(&task);
        }
    }
    std::stable_sort(
        mine.begin(), mine.end(),
        [](const plan::WriteTask* a, const plan::WriteTask* b) { return a->bytes < b->bytes; });
    for (const plan::WriteTask* task_pointer : mine) {
        const plan::WriteTask& task = *task_pointer;
        const output::OutputFileLayout& layout = (*context.layouts)[task.file];
        const std::string temp = temp_path(context.output_dir, layout.name);
        io::File file = io::File::open_write(temp);
        report.temp_files.push_back(temp);
        file.truncate(layout.size);
        if (task.lead) {
            write_regions(file, layout.fixed);
        }
        std::vector<io::SlotCopy> copies = slot_copies(context, layout, task);
        std::vector<std::uint32_t> crcs = copier.copy(file, copies);
        if (ownership.tasks_per_file[task.file] == 1) {
            if (layout.needs_slot_crcs()) {
                write_regions(file, output::torch_bin_tail(layout, crcs));
            }
            publish(context, task.file, file);
            report.completed_files.push_back(task.file);
            report.temp_files.pop_back();
        } else {
            file.sync();
            if (layout.needs_slot_crcs()) {
                for (std::size_t i = 0; i < crcs.size(); ++i) {
                    report.shared_crcs.push_back(
                        {task.file, task.slot_begin + static_cast<std::uint32_t>(i), crcs[i]});
                }
            }
        }
    }
}

void finalize_split_file(const ExecuteContext& context, std::uint32_t file,
                         const std::vector<SlotCrc>& all_crcs) {
    const output::OutputFileLayout& layout = (*context.layouts)[file];
    io::File handle = io::File::open_write(temp_path(context.output_dir, layout.name));
    if (layout.needs_slot_crcs()) {
        std::vector<std::uint32_t> crcs(layout.slots.size(), 0);
        std::vector<bool> seen(layout.slots.size(), false);
        for (const SlotCrc& entry : all_crcs) {
            if (entry.file == file) {
                crcs.at(entry.slot) = entry.crc;
                seen.at(entry.slot) = true;
            }
        }
        if (std::find(seen.begin(), seen.end(), false) != seen.end()) {
            throw_internal_error("missing slot CRCs for '" + layout.name + "'");
        }
        write_regions(handle, output::torch_bin_tail(layout, crcs));
    }
    publish(context, file, handle);
}

void remove_temp_files(const ExecuteReport& report) noexcept {
    for (const std::string& path : report.temp_files) {
        try {
            io::remove_file(path);
        } catch (...) {
            // Best effort: a temp name never looks like a final output.
        }
    }
}

std::vector<std::string> verify_tasks(const ExecuteContext& context, io::InputFiles& inputs,
                                      const io::CopyOptions& copy) {
    io::CopyOptions options = copy;
    options.compare = true;
    options.backend =
        copy.backend == io::IoBackend::kCopyFileRange ? io::IoBackend::kPread : copy.backend;
    io::ExtentCopier copier(inputs, options);
    std::vector<std::string> mismatches;
    const plan::Ownership& ownership = *context.ownership;
    for (const plan::WriteTask& task : ownership.tasks) {
        if (static_cast<int>(task.rank) != context.rank) {
            continue;
        }
        const output::OutputFileLayout& layout = (*context.layouts)[task.file];
        const std::string path = final_path(context, task.file);
        io::File file = io::File::open_read(path);
        if (file.size() != layout.size) {
            mismatches.push_back(layout.name + ": size " + std::to_string(file.size()) +
                                 ", expected " + std::to_string(layout.size));
            continue;
        }
        auto check_regions = [&](const std::vector<output::FixedRegion>& regions,
                                 const char* what) {
            for (const output::FixedRegion& region : regions) {
                std::vector<std::byte> actual(region.bytes.size());
                file.read_exact(region.offset, actual);
                if (actual != region.bytes) {
                    mismatches.push_back(layout.name + ": " + what + " bytes at offset " +
                                         std::to_string(region.offset) + " differ");
                }
            }
        };
        if (task.lead) {
            check_regions(layout.fixed, "header");
        }
        std::vector<io::SlotCopy> copies = slot_copies(context, layout, task);
        io::ExtentCopier::Comparison result = copier.compare(file, copies);
        for (std::size_t i = 0; i < copies.size(); ++i) {
            if (result.mismatched[i]) {
                mismatches.push_back(
                    layout.name + ": tensor '" +
                    context.plan->tensors[layout.slots[task.slot_begin + i].tensor].name +
                    "' differs from the checkpoint");
            }
        }
        if (task.lead && layout.needs_slot_crcs() && ownership.tasks_per_file[task.file] == 1) {
            check_regions(output::torch_bin_tail(layout, result.crcs), "zip directory");
        }
    }
    return mismatches;
}

}  // namespace z2f::driver
