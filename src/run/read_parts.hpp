// What the in-memory reader (driver/state_dict_reader.cpp) reads, from a RunPlan whose one
// output file holds every tensor and whose "ranks" are its threads: each slot part of each
// write task (task_parts.hpp) becomes a read part that fills a run of one tensor's memory, so
// that a read of every tensor splits among the threads exactly as a conversion's writes split
// among ranks (plan/ownership.hpp), and a read of one tensor reads only its parts.
//
// The input CRC check (input_check.hpp) then needs one more fact when tensors are read a few
// at a time: which records a read completes. A record's CRC is the join of its pieces; the
// pieces a copy reads are folded while its part is read, the others (padding, bytes of no
// selected tensor) are read for the check alone. CheckProgress counts, per record, the parts
// not read yet that fold a piece of it: a read that brings the count to zero completes the
// record, which is then checked once (its extra pieces read, its pieces joined).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "run/input_check.hpp"
#include "run/run_plan.hpp"
#include "run/task_parts.hpp"

namespace z2f::run {

struct ReadPart {
    std::uint32_t tensor = 0;  // the plan tensor whose memory it fills (the slot's own)
    std::uint32_t task = 0;    // index into plan.tasks
    std::uint32_t rank = 0;    // the thread that reads it when every tensor is read
    SlotPart part;             // output bytes [skip, skip + length) of the tensor, and sources
};

struct ReadParts {
    std::vector<ReadPart> parts;                        // file by file, task by task
    std::vector<std::vector<std::uint32_t>> of_tensor;  // indices into parts, per plan tensor
};

ReadParts plan_read_parts(const RunPlan& plan);

class CheckProgress {
  public:
    CheckProgress(const InputCheckPlan& check, const ReadParts& parts);

    // The check ranges that read part `part` folds (empty when it folds none).
    std::span<const CrcRange> ranges_of(std::uint32_t part) const;
    // Whether `part` was read already (its pieces folded by an earlier read).
    bool was_read(std::uint32_t part) const { return read_.at(part); }
    // The checked records (indices into check.records), not checked yet, that are complete once
    // `parts` are read too: every piece a part folds is then folded. The first call also
    // returns the records no part folds anything of (read for the check alone).
    std::vector<std::uint32_t> completed_by(std::span<const std::uint32_t> parts) const;
    // After a read that succeeded: its parts are read and the records it completed checked.
    void mark_read(std::span<const std::uint32_t> parts);
    void mark_checked(std::span<const std::uint32_t> records);

  private:
    const InputCheckPlan& check_;
    const ReadParts& parts_;
    std::vector<bool> read_;                                   // per part
    std::vector<std::vector<std::uint32_t>> records_of_part_;  // checked records it folds into
    std::vector<std::uint32_t> unread_parts_;                  // per checked record
    std::vector<bool> checked_;                                // per checked record
};

}  // namespace z2f::run
