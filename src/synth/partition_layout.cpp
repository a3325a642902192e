#include "synth/partition_layout.hpp"

#include <algorithm>

namespace z2f::synth {

std::uint64_t FlatGroup::padding(std::uint32_t rank) const noexcept {
    std::uint64_t end = (std::uint64_t{rank} + 1) * partition;
    if (end <= numel) {
        return 0;
    }
    return std::min(end - numel, partition);
}

std::uint64_t FlatGroup::saved_length(std::uint32_t rank) const noexcept {
    return partition - padding(rank);
}

Stage2Layout stage2_layout(const ModelSpec& spec, std::uint32_t world) {
    Stage2Layout layout;
    layout.world = world;
    layout.groups.resize(static_cast<std::size_t>(spec.group_count));
    for (std::size_t i = 0; i < spec.params.size(); ++i) {
        const ModelParam& param = spec.params[i];
        if (!param.trainable) {
            continue;
        }
        FlatGroup& group = layout.groups[static_cast<std::size_t>(param.group)];
        group.params.push_back(i);
        group.numel += param.numel();
    }
    const std::uint64_t alignment = 2 * std::uint64_t{world};
    for (FlatGroup& group : layout.groups) {
        group.aligned = (group.numel + alignment - 1) / alignment * alignment;
        group.partition = group.aligned / world;
    }
    return layout;
}

std::vector<Fragment> stage2_fragments(const ModelSpec& spec, const FlatGroup& group,
                                       std::uint32_t rank) {
    std::vector<Fragment> fragments;
    const std::uint64_t begin = std::uint64_t{rank} * group.partition;
    const std::uint64_t end = begin + group.saved_length(rank);
    std::uint64_t offset = 0;  // flat offset of the current param
    for (std::size_t index : group.params) {
        std::uint64_t n = spec.params[index].numel();
        std::uint64_t lo = std::max(offset, begin);
        std::uint64_t hi = std::min(offset + n, end);
        if (lo < hi) {
            fragments.push_back({index, lo - offset, hi - lo, lo - begin});
        }
        offset += n;
        if (offset >= end) {
            break;
        }
    }
    return fragments;
}

std::uint64_t stage3_slot(std::uint64_t numel, std::uint32_t world) noexcept {
    return (numel + world - 1) / world;
}

Fragment stage3_fragment(std::uint64_t numel, std::uint32_t world, std::uint32_t rank) noexcept {
    std::uint64_t slot = stage3_slot(numel, world);
    std::uint64_t first = std::min(std::uint64_t{rank} * slot, numel);
    std::uint64_t last = std::min(first + slot, numel);
    return {0, first, last - first, 0};
}

Stage3Layout stage3_layout(const ModelSpec& spec, std::uint32_t world,
                           std::uint64_t sub_group_size) {
    Stage3Layout layout;
    layout.world = world;
    for (int g = 0; g < spec.group_count; ++g) {
        std::vector<std::size_t> members;
        std::uint64_t group_total = 0;
        for (std::size_t i = 0; i < spec.params.size(); ++i) {
            if (spec.params[i].trainable && spec.params[i].group == g) {
                members.push_back(i);
                group_total += stage3_slot(spec.params[i].numel(), world);
            }
        }
        SubGroup current;
        current.param_group = g;
        auto close = [&] {
            layout.subgroups.push_back(std::move(current));
            current = SubGroup{};
            current.param_group = g;
        };
        for (std::size_t k = 0; k < members.size(); ++k) {
            std::uint64_t slot = stage3_slot(spec.params[members[k]].numel(), world);
            current.params.push_back(members[k]);
            current.slots.push_back(slot);
            current.offsets.push_back(current.total);
            current.total += slot;
            bool last = k + 1 == members.size();
            // DeepSpeed keeps a group whole when it fits in one sub-group; otherwise it closes
            // a sub-group as soon as the running sum reaches the size.
            if (last || (group_total > sub_group_size && current.total >= sub_group_size)) {
                close();
            }
        }
    }
    return layout;
}

}  // namespace z2f::synth
