// The execute phase on one rank: write the tasks this rank owns (plan/ownership.hpp).
//
// A task writes its slots (and, as its file's lead, the fixed regions) into `<name>.tmp`,
// created at the file's full size. A file written by a single task is finished on the spot:
// the torch zip tail is appended from the slots' CRCs, the file is fsynced and renamed to its
// final name, so that `--resume` can trust it. A file shared by several tasks is fsynced by
// each, and finished by its lead once all ranks agree (`finalize_split_file`), using the
// slot CRCs gathered from every rank.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "io/extent_copier.hpp"
#include "io/input_files.hpp"
#include "output/output_layout.hpp"
#include "output/output_plan.hpp"
#include "plan/ownership.hpp"
#include "plan/tensor_plan.hpp"

namespace z2f::driver {

struct SlotCrc {
    std::uint32_t file = 0;
    std::uint32_t slot = 0;
    std::uint32_t crc = 0;
};

struct ExecuteContext {
    const plan::TensorPlan* plan = nullptr;
    const output::OutputPlan* outputs = nullptr;
    const std::vector<output::OutputFileLayout>* layouts = nullptr;
    const plan::Ownership* ownership = nullptr;
    const std::vector<bool>* skip = nullptr;  // files complete already (--resume)
    std::string output_dir;
    int rank = 0;
};

// What a rank did, filled as it goes so that cleanup after a failure knows everything.
struct ExecuteReport {
    std::vector<std::uint32_t> completed_files;  // renamed to their final names by this rank
    std::vector<SlotCrc> shared_crcs;            // CRCs of slots in files shared between ranks
    std::vector<std::string> temp_files;         // temp files this rank opened
};

void execute_tasks(const ExecuteContext& context, io::InputFiles& inputs,
                   const io::CopyOptions& copy, ExecuteReport& report);

// Lead of a shared file: appends the CRC-dependent tail (torch zip), fsyncs, renames.
void finalize_split_file(const ExecuteContext& context, std::uint32_t file,
                         const std::vector<SlotCrc>& all_crcs);

// Removes this rank's temp files (after a failure); never throws.
void remove_temp_files(const ExecuteReport& report) noexcept;

// Re-reads this rank's tasks in the final files and compares every byte with what the sources
// give (fixed regions, converted tensor bytes, torch zip tails). Returns one line per mismatch.
std::vector<std::string> verify_tasks(const ExecuteContext& context, io::InputFiles& inputs,
                                      const io::CopyOptions& copy);

// The tensor whose bytes fill a slot: the slot's own, or for an alias written out again, its
// owner's.
const plan::PlannedTensor& slot_source(const plan::TensorPlan& plan, std::uint32_t tensor);

}  // namespace z2f::driver
