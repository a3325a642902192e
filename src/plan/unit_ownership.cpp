#include "plan/unit_ownership.hpp"

#include <algorithm>
#include <numeric>
#include <tuple>

#include "common/errors.hpp"

namespace z2f::plan {

Ownership assign_unit_ownership(const std::vector<OwnershipUnit>& units, std::uint32_t files,
                                std::uint32_t ranks) {
    if (ranks == 0) {
        throw_internal_error("ownership for zero ranks");
    }
    std::vector<std::size_t> order(units.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        return units[a].weight > units[b].weight;
    });

    Ownership result;
    result.bytes_per_rank.assign(ranks, 0);
    for (std::size_t index : order) {
        // min_element keeps the first of equal loads: the lower rank.
        auto least = std::min_element(result.bytes_per_rank.begin(), result.bytes_per_rank.end());
        const auto rank = static_cast<std::uint32_t>(least - result.bytes_per_rank.begin());
        *least += units[index].weight;
        for (WriteTask task : units[index].tasks) {
            if (task.file >= files) {
                throw_internal_error("ownership unit names file " + std::to_string(task.file) +
                                     " of " + std::to_string(files));
            }
            task.rank = rank;
            task.lead = false;
            result.tasks.push_back(task);
        }
    }
    std::sort(result.tasks.begin(), result.tasks.end(), [](const WriteTask& a, const WriteTask& b) {
        return std::tie(a.file, a.begin, a.slot_begin) < std::tie(b.file, b.begin, b.slot_begin);
    });

    result.tasks_per_file.assign(files, 0);
    std::vector<std::uint32_t> next_slot(files, 0);
    std::vector<std::uint64_t> next_byte(files, 0);
    for (WriteTask& task : result.tasks) {
        if (task.slot_begin != next_slot[task.file] || task.slot_end < task.slot_begin ||
            task.begin != next_byte[task.file] || task.end < task.begin) {
            throw_internal_error("ownership units do not tile the slots and bytes of file " +
                                 std::to_string(task.file));
        }
        next_slot[task.file] = task.slot_end;
        next_byte[task.file] = task.end;
        task.lead = result.tasks_per_file[task.file]++ == 0;
    }
    for (std::uint32_t f = 0; f < files; ++f) {
        if (result.tasks_per_file[f] == 0) {
            throw_internal_error("ownership units leave file " + std::to_string(f) +
                                 " without a task");
        }
    }
    return result;
}

}  // namespace z2f::plan
