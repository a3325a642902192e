#include "driver/task_copies.hpp"

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

}  // namespace z2f::driver
