#include "plan/ownership.hpp"

#include <algorithm>
#include <numeric>
#include <tuple>

#include "common/errors.hpp"

namespace z2f::plan {
namespace {

std::uint64_t task_bytes(const FileWork& file, std::uint32_t begin, std::uint32_t end) {
    return std::accumulate(file.slot_bytes.begin() + begin, file.slot_bytes.begin() + end,
                           std::uint64_t{0});
}

}  // namespace

Ownership assign_ownership(const std::vector<FileWork>& files, std::uint32_t ranks) {
    if (ranks == 0) {
        throw_internal_error("ownership for zero ranks");
    }
    std::vector<WriteTask> tasks;
    for (std::uint32_t f = 0; f < files.size(); ++f) {
        auto slots = static_cast<std::uint32_t>(files[f].slot_bytes.size());
        tasks.push_back({f, 0, slots, task_bytes(files[f], 0, slots), 0, true});
    }

    // Split the largest splittable task until every rank can have one.
    while (tasks.size() < ranks) {
        auto best = tasks.end();
        for (auto it = tasks.begin(); it != tasks.end(); ++it) {
            if (it->slot_end - it->slot_begin < 2)
                continue;
            if (best == tasks.end() || it->bytes > best->bytes ||
                (it->bytes == best->bytes &&
                 std::tie(it->file, it->slot_begin) < std::tie(best->file, best->slot_begin))) {
                best = it;
            }
        }
        if (best == tasks.end() || best->bytes == 0) {
            break;
        }
        const FileWork& file = files[best->file];
        // Cut after the slot where the running sum first reaches half; keep both halves non-empty.
        std::uint64_t half = best->bytes / 2;
        std::uint64_t sum = 0;
        std::uint32_t cut = best->slot_begin + 1;
        for (std::uint32_t s = best->slot_begin; s + 1 < best->slot_end; ++s) {
            std::uint64_t before = sum;
            sum += file.slot_bytes[s];
            cut = s + 1;
            if (sum >= half) {
                // Cutting before s can be closer to the midpoint.
                if (s > best->slot_begin && half - before < sum - half) {
                    cut = s;
                }
                break;
            }
        }
        WriteTask second = *best;
        second.slot_begin = cut;
        second.bytes = task_bytes(file, cut, best->slot_end);
        second.lead = false;
        best->slot_end = cut;
        best->bytes = task_bytes(file, best->slot_begin, cut);
        tasks.push_back(second);
    }

    // Largest first to the least-loaded rank.
    std::vector<std::size_t> order(tasks.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        const WriteTask& x = tasks[a];
        const WriteTask& y = tasks[b];
        if (x.bytes != y.bytes)
            return x.bytes > y.bytes;
        return std::tie(x.file, x.slot_begin) < std::tie(y.file, y.slot_begin);
    });
    Ownership result;
    result.bytes_per_rank.assign(ranks, 0);
    for (std::size_t index : order) {
        auto least = std::min_element(result.bytes_per_rank.begin(), result.bytes_per_rank.end());
        tasks[index].rank = static_cast<std::uint32_t>(least - result.bytes_per_rank.begin());
        *least += tasks[index].bytes;
    }
    std::sort(tasks.begin(), tasks.end(), [](const WriteTask& a, const WriteTask& b) {
        return std::tie(a.file, a.slot_begin) < std::tie(b.file, b.slot_begin);
    });
    result.tasks_per_file.assign(files.size(), 0);
    for (const WriteTask& task : tasks) {
        ++result.tasks_per_file[task.file];
    }
    result.tasks = std::move(tasks);
    return result;
}

}  // namespace z2f::plan
