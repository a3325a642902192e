#include "plan/unit_ownership.hpp"

#include <algorithm>
#include <numeric>
#include <tuple>

#include "common/errors.hpp"

namespace z2f::plan {

namespace {

// Ranks of the units, largest weight first to the least-loaded rank; `heaviest` gets the
// heaviest rank's load.
std::vector<std::uint32_t> largest_first(const std::vector<OwnershipUnit>& units,
                                         std::uint32_t ranks, std::uint64_t& heaviest) {
    std::vector<std::size_t> order(units.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        return units[a].weight > units[b].weight;
    });
    std::vector<std::uint64_t> load(ranks, 0);
    std::vector<std::uint32_t> rank_of(units.size(), 0);
    for (std::size_t index : order) {
        // min_element keeps the first of equal loads: the lower rank.
        auto least = std::min_element(load.begin(), load.end());
        rank_of[index] = static_cast<std::uint32_t>(least - load.begin());
        *least += units[index].weight;
    }
    heaviest = *std::max_element(load.begin(), load.end());  // ranks > 0
    return rank_of;
}

// Ranks of the units in runs, in the units' order, no run heavier than `limit`: each unit
// joins the current run unless that would pass the limit. Empty when more than `ranks` runs
// are needed.
std::vector<std::uint32_t> runs_within(const std::vector<OwnershipUnit>& units, std::uint32_t ranks,
                                       std::uint64_t limit) {
    std::vector<std::uint32_t> rank_of(units.size(), 0);
    std::uint32_t rank = 0;
    std::uint64_t load = 0;
    for (std::size_t i = 0; i < units.size(); ++i) {
        const std::uint64_t weight = units[i].weight;
        if (weight > limit)
            return {};
        if (load > 0 && weight > limit - load) {
            if (++rank == ranks)
                return {};
            load = 0;
        }
        load += weight;
        rank_of[i] = rank;
    }
    return rank_of;
}

// Contiguous runs when their heaviest rank is within 1 % of largest-first's, else
// largest-first (see the header).
std::vector<std::uint32_t> choose_ranks(const std::vector<OwnershipUnit>& units,
                                        std::uint32_t ranks) {
    std::uint64_t balanced = 0;
    std::vector<std::uint32_t> scattered = largest_first(units, ranks, balanced);
    const std::uint64_t allowed = balanced + balanced / 100;
    if (runs_within(units, ranks, allowed).empty())
        return scattered;
    // The lightest limit that still fits in `ranks` runs: the best-balanced runs. A limit of 0
    // fits only when every unit weighs 0, and then `allowed` is 0 already.
    std::uint64_t low = 0;
    std::uint64_t high = allowed;
    while (high - low > 1) {
        const std::uint64_t middle = low + (high - low) / 2;
        (runs_within(units, ranks, middle).empty() ? low : high) = middle;
    }
    return runs_within(units, ranks, high);
}

}  // namespace

Ownership assign_unit_ownership(const std::vector<OwnershipUnit>& units, std::uint32_t files,
                                std::uint32_t ranks) {
    if (ranks == 0) {
        throw_internal_error("ownership for zero ranks");
    }
    const std::vector<std::uint32_t> rank_of = choose_ranks(units, ranks);

    Ownership result;
    result.bytes_per_rank.assign(ranks, 0);
    for (std::size_t index = 0; index < units.size(); ++index) {
        result.bytes_per_rank[rank_of[index]] += units[index].weight;
        for (WriteTask task : units[index].tasks) {
            if (task.file >= files) {
                throw_internal_error("ownership unit names file " + std::to_string(task.file) +
                                     " of " + std::to_string(files));
            }
            task.rank = rank_of[index];
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
