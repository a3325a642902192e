#include "driver/execute/task_copies.hpp"

#include <algorithm>

namespace z2f::driver {

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

std::string final_path(const std::string& output_dir, const run::OutputFileRecord& file) {
    return output_dir + "/" + file.name();
}

std::vector<const plan::WriteTask*> tasks_to_write(const run::RunPlan& plan, std::uint32_t rank) {
    std::vector<const plan::WriteTask*> mine;
    for (const plan::WriteTask* task : plan.tasks_of(rank)) {
        if (!plan.files[task->file].skip)
            mine.push_back(task);
    }
    std::stable_sort(
        mine.begin(), mine.end(),
        [](const plan::WriteTask* a, const plan::WriteTask* b) { return a->bytes < b->bytes; });
    return mine;
}

}  // namespace z2f::driver
