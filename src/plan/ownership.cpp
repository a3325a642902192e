#include "plan/ownership.hpp"

#include <algorithm>
#include <iterator>
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

// The block multiple strictly inside (begin, end) nearest `target` that splits no element,
// searching outwards from it; none when the range spans fewer than two blocks or every
// candidate splits an element.
std::optional<std::uint64_t> choose_cut(const FileWork& file, std::uint64_t begin,
                                        std::uint64_t end, std::uint64_t block,
                                        std::uint64_t target) {
    const std::uint64_t first = begin / block + 1;  // smallest multiple index > begin
    if (end == 0)
        return std::nullopt;
    const std::uint64_t last = (end - 1) / block;  // largest multiple index < end
    if (first > last)
        return std::nullopt;
    const std::uint64_t nearest = std::clamp<std::uint64_t>(
        target / block + (target % block >= block - block / 2 ? 1 : 0), first, last);
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

// The file offset at which the tensor bytes from `begin` reach `bytes` (0 < bytes < the
// tensor bytes of [begin, size)).
std::uint64_t offset_after_bytes(const FileWork& file, std::uint64_t begin, std::uint64_t bytes) {
    for (std::uint32_t s = first_slot_from(file, begin); s < file.slots.size(); ++s) {
        const SlotWork& slot = file.slots[s];
        const std::uint64_t from = std::max(slot.offset, begin);
        const std::uint64_t to = slot.offset + slot.length;
        if (to <= from)
            continue;
        if (bytes <= to - from)
            return from + bytes;
        bytes -= to - from;
    }
    return file.size;
}

// Where rank k's share of `total` bytes begins in the files laid end to end: k * total / ranks,
// without overflowing.
std::uint64_t share_begin(std::uint64_t total, std::uint32_t ranks, std::uint32_t k) {
    return total / ranks * k + total % ranks * k / ranks;
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
    std::uint64_t total = 0;
    for (const FileWork& file : files)
        total += slot_bytes_in_range(file, 0, file.size);

    // The files' tensor bytes laid end to end and cut into `ranks` equal shares: rank k takes
    // the bytes from share_begin(k) on. A share that ends inside a file cuts it at the clean
    // block multiple nearest that point; where the range has none, the whole rest goes to this
    // rank if its share holds at least as much of it as the next share does. Shares are absolute
    // positions, so a cut that lands short or long moves only the next rank's start.
    Ownership result;
    result.bytes_per_rank.assign(ranks, 0);
    std::vector<WriteTask> tasks;
    std::uint32_t rank = 0;
    std::uint64_t done = 0;  // tensor bytes in the tasks so far
    const auto add = [&](WriteTask task) {
        task.rank = rank;
        done += task.bytes;
        result.bytes_per_rank[rank] += task.bytes;
        tasks.push_back(task);
    };
    for (std::uint32_t f = 0; f < files.size(); ++f) {
        const FileWork& file = files[f];
        std::uint64_t begin = 0;
        while (true) {
            const std::uint64_t rest = slot_bytes_in_range(file, begin, file.size);
            while (rest > 0 && rank + 1 < ranks && done >= share_begin(total, ranks, rank + 1))
                ++rank;
            const std::uint64_t quota_end =
                rank + 1 < ranks ? share_begin(total, ranks, rank + 1) : total;
            if (rest == 0 || rank + 1 == ranks || done + rest <= quota_end) {
                add(make_task(file, f, begin, file.size));
                break;
            }
            const std::uint64_t want = quota_end - done;  // 0 < want < rest
            const std::optional<std::uint64_t> cut = choose_cut(
                file, begin, file.size, block_size, offset_after_bytes(file, begin, want));
            const std::optional<WriteTask> head =
                cut ? std::optional(make_task(file, f, begin, *cut)) : std::nullopt;
            // A part of header or padding alone on either side is no cut.
            if (head && head->bytes > 0 && head->bytes < rest) {
                add(*head);
                begin = *cut;
                ++rank;
            } else if (const std::uint64_t next_share_end =
                           rank + 2 < ranks ? share_begin(total, ranks, rank + 2) : total;
                       want >= std::min(rest - want, next_share_end - quota_end)) {
                // This share holds at least as much of the range as the next one does.
                add(make_task(file, f, begin, file.size));
                break;
            } else {
                ++rank;
            }
        }
    }

    // The tasks came in (file, begin) order, as Ownership promises.
    result.tasks_per_file.assign(files.size(), 0);
    for (const WriteTask& task : tasks) {
        ++result.tasks_per_file[task.file];
    }
    result.tasks = std::move(tasks);
    return result;
}

}  // namespace z2f::plan
