#include "run/read_parts.hpp"

#include <algorithm>
#include <unordered_map>

#include "common/errors.hpp"

namespace z2f::run {

ReadParts plan_read_parts(const RunPlan& plan) {
    ReadParts read;
    read.of_tensor.resize(plan.tensors.tensors.size());
    for (std::uint32_t t = 0; t < plan.tasks.size(); ++t) {
        const plan::WriteTask& task = plan.tasks[t];
        const output::OutputFileLayout& layout = plan.files.at(task.file).layout;
        for (SlotPart& part : slot_parts(plan, task)) {
            const std::uint32_t tensor = layout.slots.at(part.slot).tensor;
            read.of_tensor.at(tensor).push_back(static_cast<std::uint32_t>(read.parts.size()));
            read.parts.push_back({tensor, t, task.rank, std::move(part)});
        }
    }
    return read;
}

CheckProgress::CheckProgress(const InputCheckPlan& check, const ReadParts& parts)
    : check_(check),
      parts_(parts),
      read_(parts.parts.size(), false),
      records_of_part_(parts.parts.size()),
      unread_parts_(check.records.size(), 0),
      checked_(check.records.size(), false) {
    std::vector<std::uint32_t> checked_of_piece(check.pieces.size(), 0);
    for (std::uint32_t c = 0; c < check.records.size(); ++c) {
        const CheckedRecord& record = check.records[c];
        for (std::uint32_t p = record.first_piece; p < record.first_piece + record.piece_count; ++p)
            checked_of_piece[p] = c;
    }
    for (std::uint32_t p = 0; p < parts.parts.size(); ++p) {
        std::vector<std::uint32_t>& records = records_of_part_[p];
        for (const CrcRange& range : ranges_of(p)) {
            const std::uint32_t c = checked_of_piece.at(range.piece);
            if (std::find(records.begin(), records.end(), c) == records.end())
                records.push_back(c);
        }
        for (std::uint32_t c : records)
            ++unread_parts_[c];
    }
}

std::span<const CrcRange> CheckProgress::ranges_of(std::uint32_t part) const {
    const ReadPart& read = parts_.parts.at(part);
    const std::vector<CrcRange>* ranges = check_.ranges_of(read.task, read.part.slot);
    return ranges == nullptr ? std::span<const CrcRange>{} : std::span<const CrcRange>(*ranges);
}

std::vector<std::uint32_t> CheckProgress::completed_by(std::span<const std::uint32_t> parts) const {
    std::unordered_map<std::uint32_t, std::uint32_t> reading;  // checked record -> parts read now
    std::vector<bool> counted(read_.size(), false);
    for (std::uint32_t p : parts) {
        if (read_.at(p) || counted[p])
            continue;
        counted[p] = true;
        for (std::uint32_t c : records_of_part_[p])
            ++reading[c];
    }
    std::vector<std::uint32_t> completed;
    for (std::uint32_t c = 0; c < unread_parts_.size(); ++c) {
        if (checked_[c])
            continue;
        auto found = reading.find(c);
        const std::uint32_t now = found == reading.end() ? 0 : found->second;
        if (now == unread_parts_[c])
            completed.push_back(c);
    }
    return completed;
}

void CheckProgress::mark_read(std::span<const std::uint32_t> parts) {
    for (std::uint32_t p : parts) {
        if (read_.at(p))
            continue;
        read_[p] = true;
        for (std::uint32_t c : records_of_part_[p]) {
            if (unread_parts_[c] == 0)
                throw_internal_error("input check: a record's parts were counted twice");
            --unread_parts_[c];
        }
    }
}

void CheckProgress::mark_checked(std::span<const std::uint32_t> records) {
    for (std::uint32_t c : records)
        checked_.at(c) = true;
}

}  // namespace z2f::run
