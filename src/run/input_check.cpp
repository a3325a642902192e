#include "run/input_check.hpp"

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <map>

#include "common/crc32.hpp"
#include "common/errors.hpp"
#include "run/task_parts.hpp"

namespace z2f::run {
namespace {

// The records of `records` (sorted by file, then offset; disjoint within a file) that overlap
// bytes [begin, end) of input `file`, as an index range.
std::pair<std::size_t, std::size_t> overlapping(const std::vector<InputRecord>& records,
                                                std::uint32_t file, std::uint64_t begin,
                                                std::uint64_t end) {
    auto first =
        std::lower_bound(records.begin(), records.end(), std::pair{file, begin},
                         [](const InputRecord& record, const auto& key) {
                             return record.file < key.first ||
                                    (record.file == key.first && record.end() <= key.second);
                         });
    auto last = first;
    while (last != records.end() && last->file == file && last->offset < end)
        ++last;
    return {static_cast<std::size_t>(first - records.begin()),
            static_cast<std::size_t>(last - records.begin())};
}

// The parts of [begin, end) not in `taken` (disjoint intervals start -> end), which then are.
std::vector<std::pair<std::uint64_t, std::uint64_t>> claim(
    std::map<std::uint64_t, std::uint64_t>& taken, std::uint64_t begin, std::uint64_t end) {
    std::vector<std::pair<std::uint64_t, std::uint64_t>> fresh;
    auto it = taken.upper_bound(begin);
    if (it != taken.begin() && std::prev(it)->second > begin)
        --it;
    std::uint64_t position = begin;
    while (position < end) {
        if (it == taken.end() || it->first >= end) {
            fresh.emplace_back(position, end);
            break;
        }
        if (it->first > position)
            fresh.emplace_back(position, it->first);
        position = std::max(position, it->second);
        ++it;
    }
    for (const auto& [from, to] : fresh) {
        // Joined to the interval it continues: rows claimed one after another stay one node.
        auto next = taken.lower_bound(from);
        if (next != taken.begin() && std::prev(next)->second == from)
            std::prev(next)->second = to;
        else
            taken.emplace(from, to);
    }
    return fresh;
}

// Appends unless it repeats the last entry (a tensor's extents in one record come one after
// the other); sorted_unique removes the rest once, instead of a search per extent: at W = 512
// a record is touched by every parameter.
void add_unique(std::vector<std::uint32_t>& list, std::uint32_t value) {
    if (list.empty() || list.back() != value)
        list.push_back(value);
}

void sorted_unique(std::vector<std::uint32_t>& list) {
    std::sort(list.begin(), list.end());
    list.erase(std::unique(list.begin(), list.end()), list.end());
}

struct RecordState {
    bool touched = false;
    std::map<std::uint64_t, std::uint64_t> taken;
    std::vector<std::uint32_t> claims;  // indices into the provisional pieces
    std::vector<std::uint32_t> tensors;
    std::vector<std::uint32_t> files;
};

// A copy's ranges, with those that may still grow: keyed by (record, where the range ends),
// the range to extend when the copy's next fresh bytes of that record start there.
struct SlotRanges {
    std::vector<CrcRange> ranges;
    std::map<std::pair<std::size_t, std::uint64_t>, std::size_t> growing;
};

// The range of `slot` that the fresh bytes [from, ...) of record `record` in extent `index`
// continue, or null: one that ends at `from` in that record at the end of its last extent, with
// this extent starting at `from` and coming `stride` extents after that one (any number after
// it when the range has one extent: that sets the stride).
CrcRange* continued_range(SlotRanges& slot, const std::vector<SourceExtent>& extents,
                          std::size_t record, std::uint32_t index, std::uint64_t from) {
    const SourceExtent& extent = extents[index];
    if (extent.offset != from)
        return nullptr;
    auto found = slot.growing.find({record, from});
    if (found == slot.growing.end())
        return nullptr;
    CrcRange& range = slot.ranges[found->second];
    const std::uint32_t last = range.last_extent();
    const SourceExtent& before = extents[last];
    if (index <= last || before.file != extent.file || before.offset + before.length != from)
        return nullptr;
    if (range.extents > 1 && index - last != range.stride)
        return nullptr;
    return &range;
}

std::string hex(std::uint32_t value) {
    char text[16];
    std::snprintf(text, sizeof text, "0x%08x", value);
    return text;
}

}  // namespace

const std::vector<CrcRange>* InputCheckPlan::ranges_of(std::uint32_t task,
                                                       std::uint32_t slot) const {
    auto it = slot_ranges.find(slot_key(task, slot));
    return it == slot_ranges.end() ? nullptr : &it->second;
}

std::uint64_t InputCheckPlan::extra_bytes() const noexcept {
    std::uint64_t bytes = 0;
    for (const CheckPiece& piece : pieces) {
        if (piece.extra_read)
            bytes += piece.length;
    }
    return bytes;
}

std::optional<std::string> unchecked_records_warning(const RunPlan& plan,
                                                     const InputCheckPlan& check) {
    std::vector<std::uint32_t> zip_records;
    for (std::uint32_t r : check.without_crc) {
        if (!plan.tensors.records.at(r).format_has_no_crc)
            zip_records.push_back(r);
    }
    if (zip_records.empty())
        return std::nullopt;
    const InputRecord& first = plan.tensors.records.at(zip_records.front());
    return std::to_string(zip_records.size()) +
           " input record(s) carry no CRC-32 (written with torch's CRC computation off), so their "
           "bytes cannot be checked; the first: '" +
           plan.tensors.inputs.at(first.file).path + "': " + first.name;
}

InputCheckPlan plan_input_check(const RunPlan& plan) {
    const std::vector<InputRecord>& records = plan.tensors.records;
    std::vector<RecordState> state(records.size());
    std::vector<CheckPiece> provisional;
    InputCheckPlan check;

    // Marks the records extent `index` of `extents` touches; `slot` (null: the bytes are only
    // compared, not copied) receives the pieces it is the first to read.
    auto touch = [&](std::uint32_t tensor, std::uint32_t file,
                     const std::vector<SourceExtent>& extents, std::uint32_t index,
                     std::uint32_t rank, SlotRanges* slot) {
        const SourceExtent& extent = extents[index];
        auto [first, last] =
            overlapping(records, extent.file, extent.offset, extent.offset + extent.length);
        for (std::size_t r = first; r < last; ++r) {
            RecordState& record = state[r];
            record.touched = true;
            add_unique(record.tensors, tensor);
            add_unique(record.files, file);
            if (slot == nullptr || records[r].crc32 == 0)
                continue;
            const std::uint64_t begin = std::max(extent.offset, records[r].offset);
            const std::uint64_t end = std::min(extent.offset + extent.length, records[r].end());
            for (const auto& [from, to] : claim(record.taken, begin, end)) {
                if (CrcRange* run = continued_range(*slot, extents, r, index, from)) {
                    // The shard's next row, right after its last one in the file: one range
                    // and one piece for a run of rows (extent.hpp).
                    if (run->extents == 1)
                        run->stride = index - run->extent;
                    run->extents += 1;
                    run->length += to - from;
                    provisional[run->piece].length += to - from;
                    auto node = slot->growing.extract({r, from});
                    node.key() = {r, to};
                    slot->growing.insert(std::move(node));
                    continue;
                }
                const auto id = static_cast<std::uint32_t>(provisional.size());
                provisional.push_back(
                    {static_cast<std::uint32_t>(r), from, to - from, rank, false});
                record.claims.push_back(id);
                slot->growing[{r, to}] = slot->ranges.size();
                slot->ranges.push_back({index, 1, 1, from, to - from, id});
            }
        }
    };

    for (std::uint32_t f = 0; f < plan.files.size(); ++f) {
        const OutputFileRecord& file = plan.files[f];
        if (file.skip)
            continue;
        for (std::uint32_t t = file.first_task; t < file.first_task + file.task_count; ++t) {
            const plan::WriteTask& task = plan.tasks.at(t);
            for (const SlotPart& part : slot_parts(plan, task)) {
                const std::uint32_t slot_tensor = file.layout.slots.at(part.slot).tensor;
                const plan::PlannedTensor& source = plan.source_of(slot_tensor);
                const plan::PlannedTensor& written = plan.tensors.tensors.at(slot_tensor);
                // Messages name the tensor the bytes belong to, not its alias.
                const std::uint32_t tensor =
                    written.is_alias() ? static_cast<std::uint32_t>(written.alias_of) : slot_tensor;
                SlotRanges ranges;
                for (std::uint32_t e = 0; e < part.extents.size(); ++e)
                    touch(tensor, f, part.extents, e, task.rank, &ranges);
                // Replicas the replica check compares are read too: their records are checked,
                // their bytes as the checker's extra reads (by the task holding the slot's
                // first byte, so that they are counted once).
                // An averaged tensor's replicas are all read by the mean, none by a copy.
                for (const plan::TensorPiece& piece : source.pieces) {
                    if (piece.combine == plan::PieceCombine::kCopy || part.skip != 0)
                        continue;
                    const std::size_t first = piece.combine == plan::PieceCombine::kAverage ? 0 : 1;
                    for (std::size_t k = first; k < piece.sources.size(); ++k) {
                        for (std::uint32_t e = 0; e < piece.sources[k].size(); ++e)
                            touch(tensor, f, piece.sources[k], e, task.rank, nullptr);
                    }
                }
                if (!ranges.ranges.empty())
                    check.slot_ranges.emplace(InputCheckPlan::slot_key(t, part.slot),
                                              std::move(ranges.ranges));
            }
        }
    }

    // Final pieces: each record's claims and the gaps between them, in file order.
    std::vector<std::uint32_t> final_id(provisional.size(), 0);
    for (std::uint32_t r = 0; r < records.size(); ++r) {
        RecordState& record = state[r];
        if (!record.touched)
            continue;
        if (records[r].crc32 == 0) {
            check.without_crc.push_back(r);
            continue;
        }
        std::sort(record.claims.begin(), record.claims.end(),
                  [&](std::uint32_t a, std::uint32_t b) {
                      return provisional[a].offset < provisional[b].offset;
                  });
        const std::uint32_t checker =
            record.claims.empty() ? r % plan.ranks : provisional[record.claims.front()].rank;
        CheckedRecord checked;
        checked.record = r;
        checked.first_piece = static_cast<std::uint32_t>(check.pieces.size());
        std::uint64_t position = records[r].offset;
        auto gap_to = [&](std::uint64_t end) {
            if (end > position)
                check.pieces.push_back({r, position, end - position, checker, true});
        };
        for (std::uint32_t id : record.claims) {
            gap_to(provisional[id].offset);
            final_id[id] = static_cast<std::uint32_t>(check.pieces.size());
            check.pieces.push_back(provisional[id]);
            position = provisional[id].offset + provisional[id].length;
        }
        gap_to(records[r].end());
        checked.piece_count = static_cast<std::uint32_t>(check.pieces.size()) - checked.first_piece;
        checked.tensors = std::move(record.tensors);
        checked.files = std::move(record.files);
        sorted_unique(checked.tensors);
        sorted_unique(checked.files);
        check.records.push_back(std::move(checked));
    }
    for (auto& [key, ranges] : check.slot_ranges) {
        for (CrcRange& range : ranges)
            range.piece = final_id[range.piece];
    }
    return check;
}

std::vector<FailedRecord> failed_records(const InputCheckPlan& check,
                                         const std::vector<InputRecord>& records,
                                         const std::vector<std::uint32_t>& piece_crcs) {
    if (piece_crcs.size() != check.pieces.size())
        throw_internal_error("input check: " + std::to_string(piece_crcs.size()) +
                             " piece CRCs for " + std::to_string(check.pieces.size()) + " pieces");
    std::vector<FailedRecord> failed;
    for (std::size_t c = 0; c < check.records.size(); ++c) {
        const CheckedRecord& checked = check.records[c];
        std::uint32_t crc = 0;
        for (std::uint32_t p = checked.first_piece; p < checked.first_piece + checked.piece_count;
             ++p) {
            crc = crc32_join(crc, piece_crcs[p], check.pieces[p].length);
        }
        const InputRecord& record = records.at(checked.record);
        if (crc != record.crc32)
            failed.push_back({checked.record, record.crc32, crc, c});
    }
    return failed;
}

std::string describe_failed_records(const RunPlan& plan, const InputCheckPlan& check,
                                    const std::vector<FailedRecord>& failed) {
    if (failed.empty())
        return {};
    const FailedRecord& first = failed.front();
    const InputRecord& record = plan.tensors.records.at(first.record);
    const CheckedRecord& checked = check.records.at(first.checked);
    std::string holding;
    constexpr std::size_t kNamed = 3;
    for (std::size_t i = 0; i < checked.tensors.size() && i < kNamed; ++i) {
        holding += (i == 0 ? "'" : ", '") + plan.tensors.tensors.at(checked.tensors[i]).name + "'";
    }
    if (checked.tensors.size() > kNamed)
        holding += " and " + std::to_string(checked.tensors.size() - kNamed) + " more tensors";
    std::string message = "'" + plan.tensors.inputs.at(record.file).path + "': record '" +
                          record.name + "' (" + std::to_string(record.length) + " bytes, holding " +
                          holding + ") fails its CRC-32 check: the zip directory records " +
                          hex(first.expected) + ", its bytes give " + hex(first.actual);
    if (failed.size() > 1)
        message += "; " + std::to_string(failed.size() - 1) + " more record(s) fail too";
    message +=
        ". The checkpoint file is damaged: copy it again from its source (--no-input-crc "
        "skips this check)";
    return message;
}

}  // namespace z2f::run
