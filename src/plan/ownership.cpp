#include "plan/ownership.hpp"

#include <algorithm>
#include <iterator>
#include <numeric>
#include <optional>
#include <tuple>

#include "common/errors.hpp"

namespace z2f::plan {
namespace {

// The first slot that ends after `offset` (or is empty at or after it).
std::uint32_t first_slot_from(const FileWork& file, std::uint64_t offset) {
    auto it = std::partition_point(file.slots.begin(), file.slots.end(), [&](const SlotWork& s) {
        return s.length == 0 ? s.offset < offset : s.offset + s.length <= offset;
    });
    return static_cast<std::uint32_t>(it - file.slots.begin());
}

// Whether `cut` splits no element: outside every slot, or on an element boundary of the one
// it falls in.
bool clean_cut(const FileWork& file, std::uint64_t cut) {
    // The last slot starting before `cut` is the only one that can hold it (slots do not
    // overlap; an empty one holds nothing).
    auto after = std::partition_point(file.slots.begin(), file.slots.end(),
                                      [&](const SlotWork& s) { return s.offset < cut; });
    if (after == file.slots.begin())
        return true;
    const SlotWork& slot = *std::prev(after);
    if (slot.offset + slot.length <= cut)
        return true;
    return (cut - slot.offset) % std::max<std::uint32_t>(slot.item, 1) == 0;
}

// The block multiple strictly inside (begin, end) nearest the midpoint that splits no
// element, searching outwards from the midpoint; none when the range spans fewer than two
// blocks or every candidate splits an element.
std::optional<std::uint64_t> choose_cut(const FileWork& file, std::uint64_t begin,
                                        std::uint64_t end, std::uint64_t block) {
    const std::uint64_t first = begin / block + 1;  // smallest multiple index > begin
    if (end == 0)
        return std::nullopt;
    const std::uint64_t last = (end - 1) / block;  // largest multiple index < end
    if (first > last)
        return std::nullopt;
    const std::uint64_t middle = begin + (end - begin) / 2;
    const std::uint64_t nearest =
        std::clamp<std::uint64_t>((middle + block / 2) / block, first, last);
    // Outwards: nearest, nearest+1, nearest-1, nearest+2, ... within [first, last].
    for (std::uint64_t step = 0; step <= last - first; ++step) {
        for (int side = 0; side < 2; ++side) {
            if (step == 0 && side == 1)
                continue;
            const bool up = side == 0;
            if (up ? nearest + step > last : nearest < first + step)
                continue;
            const std::uint64_t index = up ? nearest + step : nearest - step;
            if (clean_cut(file, index * block))
                return index * block;
        }
    }
    return std::nullopt;
}

WriteTask make_task(const FileWork& file, std::uint32_t f, std::uint64_t begin, std::uint64_t end) {
    WriteTask task;
    task.file = f;
    task.begin = begin;
    task.end = end;
    std::tie(task.slot_begin, task.slot_end) = slots_in_range(file, begin, end);
    task.bytes = slot_bytes_in_range(file, begin, end);
    task.lead = begin == 0;
    return task;
}

}  // namespace

std::pair<std::uint32_t, std::uint32_t> slots_in_range(const FileWork& file, std::uint64_t begin,
                                                       std::uint64_t end) {
    const std::uint32_t first = first_slot_from(file, begin);
    std::uint32_t last = first;
    while (last < file.slots.size()) {
        const SlotWork& slot = file.slots[last];
        const bool inside = slot.length == 0
                                ? slot.offset < end || (slot.offset == end && end == file.size)
                                : slot.offset < end;
        if (!inside)
            break;
        ++last;
    }
    return {first, last};
}

std::uint64_t slot_bytes_in_range(const FileWork& file, std::uint64_t begin, std::uint64_t end) {
    auto [first, last] = slots_in_range(file, begin, end);
    std::uint64_t bytes = 0;
    for (std::uint32_t s = first; s < last; ++s) {
        const SlotWork& slot = file.slots[s];
        const std::uint64_t from = std::max(slot.offset, begin);
        const std::uint64_t to = std::min(slot.offset + slot.length, end);
        if (to > from)
            bytes += to - from;
    }
    return bytes;
}

Ownership assign_ownership(const std::vector<FileWork>& files, std::uint32_t ranks,
                           std::uint64_t block_size) {
    if (ranks == 0 || block_size == 0) {
        throw_internal_error("ownership for zero ranks or a zero block size");
    }
    std::vector<WriteTask> tasks;
    for (std::uint32_t f = 0; f < files.size(); ++f)
        tasks.push_back(make_task(files[f], f, 0, files[f].size));

    // Split the task with the most tensor bytes until every rank can have one. Tasks that
    // cannot be cut are set aside.
    std::vector<bool> uncuttable(tasks.size(), false);
    while (tasks.size() < ranks) {
        std::size_t best = tasks.size();
        for (std::size_t t = 0; t < tasks.size(); ++t) {
            if (uncuttable[t] || tasks[t].bytes == 0)
                continue;
            if (best == tasks.size() || tasks[t].bytes > tasks[best].bytes ||
                (tasks[t].bytes == tasks[best].bytes &&
                 std::tie(tasks[t].file, tasks[t].begin) <
                     std::tie(tasks[best].file, tasks[best].begin))) {
                best = t;
            }
        }
        if (best == tasks.size())
            break;
        const WriteTask whole = tasks[best];
        const FileWork& file = files[whole.file];
        std::optional<std::uint64_t> cut = choose_cut(file, whole.begin, whole.end, block_size);
        if (!cut) {
            uncuttable[best] = true;
            continue;
        }
        tasks[best] = make_task(file, whole.file, whole.begin, *cut);
        tasks.push_back(make_task(file, whole.file, *cut, whole.end));
        uncuttable.push_back(false);
    }

    // Largest first to the least-loaded rank.
    std::vector<std::size_t> order(tasks.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        const WriteTask& x = tasks[a];
        const WriteTask& y = tasks[b];
        if (x.bytes != y.bytes)
            return x.bytes > y.bytes;
        return std::tie(x.file, x.begin) < std::tie(y.file, y.begin);
    });
    Ownership result;
    result.bytes_per_rank.assign(ranks, 0);
    for (std::size_t index : order) {
        auto least = std::min_element(result.bytes_per_rank.begin(), result.bytes_per_rank.end());
        tasks[index].rank = static_cast<std::uint32_t>(least - result.bytes_per_rank.begin());
        *least += tasks[index].bytes;
    }
    std::sort(tasks.begin(), tasks.end(), [](const WriteTask& a, const WriteTask& b) {
        return std::tie(a.file, a.begin) < std::tie(b.file, b.begin);
    });
    result.tasks_per_file.assign(files.size(), 0);
    for (const WriteTask& task : tasks) {
        ++result.tasks_per_file[task.file];
    }
    result.tasks = std::move(tasks);
    return result;
}

}  // namespace z2f::plan
