#include "run/task_parts.hpp"

#include <algorithm>

namespace z2f::run {

std::vector<SlotPart> slot_parts(const RunPlan& plan, const plan::WriteTask& task) {
    const output::OutputFileLayout& layout = plan.files.at(task.file).layout;
    std::vector<SlotPart> parts;
    parts.reserve(task.slot_end - task.slot_begin);
    for (std::uint32_t s = task.slot_begin; s < task.slot_end; ++s) {
        const output::TensorSlot& slot = layout.slots.at(s);
        const plan::PlannedTensor& source = plan.source_of(slot.tensor);
        SlotPart part;
        part.slot = s;
        part.offset = std::max(slot.offset, task.begin);
        part.skip = part.offset - slot.offset;
        part.length = std::min(slot.offset + slot.length, task.end) - part.offset;
        if (slot.length == 0)
            part.length = 0;
        part.whole = part.skip == 0 && part.length == slot.length;
        part.extents = part.whole && !source.extents_from_pieces()
                           ? source.extents
                           : plan::part_extents(source, part.skip, part.length);
        for (const std::vector<SourceExtent>& replica : source.replicas) {
            part.replicas.push_back(
                part.whole ? replica : plan::part_extents(source, replica, part.skip, part.length));
        }
        parts.push_back(std::move(part));
    }
    return parts;
}

std::vector<ClippedRegion> clip_regions(const std::vector<output::FixedRegion>& regions,
                                        std::uint64_t begin, std::uint64_t end) {
    std::vector<ClippedRegion> clipped;
    for (const output::FixedRegion& region : regions) {
        const std::uint64_t from = std::max(region.offset, begin);
        const std::uint64_t to = std::min(region.offset + region.bytes.size(), end);
        if (to <= from)
            continue;
        clipped.push_back({from, std::span(region.bytes)
                                     .subspan(static_cast<std::size_t>(from - region.offset),
                                              static_cast<std::size_t>(to - from))});
    }
    return clipped;
}

}  // namespace z2f::run
