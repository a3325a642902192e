// The execute phase on one rank: write the tasks this rank owns (run/run_plan.hpp).
//
// A task writes its slots (and, as its file's lead, the fixed regions) into `<name>.tmp`,
// created at the file's full size. A file written by a single task is finished on the spot:
// the CRC tail is appended from the slots' CRCs, the file is fsynced and renamed to its final
// name, so that `--resume` can trust it. A file shared by several tasks is fsynced by each, and
// finished by its lead once all ranks agree (`finalize_shared_file`), using the slot CRCs
// gathered from every rank.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/extent_copier.hpp"
#include "io/input_files.hpp"
#include "run/input_check.hpp"
#include "run/run_plan.hpp"
#include "run/task_parts.hpp"

namespace z2f::driver {

// The CRC-32 of a task's part of a slot in a shared torch zip file (run/task_parts.hpp):
// bytes [skip, skip + length) of the slot. The lead joins each slot's parts.
struct SlotCrc {
    std::uint32_t file = 0;
    std::uint32_t slot = 0;
    std::uint64_t skip = 0;
    std::uint64_t length = 0;
    std::uint32_t crc = 0;
};

// Where this rank writes.
struct RankTarget {
    std::string output_dir;
    std::uint32_t rank = 0;
};

// What a rank did, filled as it goes so that cleanup after a failure knows everything.
struct ExecuteReport {
    std::vector<std::uint32_t> completed_files;  // renamed to their final names by this rank
    std::vector<SlotCrc> shared_crcs;            // CRCs of slots in files shared between ranks
    std::vector<std::string> temp_files;         // temp files this rank opened
};

// The input CRC check of a run: its pieces and, filled by execute_tasks or verify_tasks, the
// CRCs of the pieces this rank checksums (the others stay 0). Absent with --no-input-crc.
struct InputCheck {
    run::InputCheckPlan plan;
    std::vector<std::uint32_t> piece_crcs;  // indexed like plan.pieces
};

// `check` (may be null) receives the CRCs of this rank's check pieces: those read while copying
// and, after the tasks, the extra reads.
void execute_tasks(const run::RunPlan& plan, const RankTarget& target, io::InputFiles& inputs,
                   const io::CopyOptions& copy, ExecuteReport& report, InputCheck* check);

// Records the CRCs of a task's slot parts (`crcs`, one per part) when its file is a shared
// torch zip file.
void note_shared_crcs(const plan::WriteTask& task, const output::OutputFileLayout& layout,
                      const std::vector<run::SlotPart>& parts, std::span<const std::uint32_t> crcs,
                      ExecuteReport& report);

// Each slot's CRC-32 of file `file`, joined from its parts in `all_crcs` (every rank's); an
// internal error when the parts do not tile every slot.
std::vector<std::uint32_t> join_slot_crcs(const run::OutputFileRecord& record, std::uint32_t file,
                                          const std::vector<SlotCrc>& all_crcs);

// Lead of a shared file: writes the CRC tail (a torch zip's), fsyncs, renames.
void finalize_shared_file(const run::RunPlan& plan, const std::string& output_dir,
                          std::uint32_t file, const std::vector<SlotCrc>& all_crcs);

// Removes this rank's temp files, and as lead of a shared file the file's temp file (after a
// failure); never throws.
void remove_temp_files(const run::RunPlan& plan, const RankTarget& target,
                       const ExecuteReport& report) noexcept;

// One difference verify_tasks found: in which file, and what (a tensor, a header range).
struct VerifyFinding {
    std::uint32_t file = 0;
    std::string what;  // "tensor 'x' differs from the checkpoint", "header bytes at ... differ"
};

// Re-reads this rank's tasks in the final files and compares every byte with what the sources
// give (fixed regions, converted tensor bytes, CRC tails); files marked `skip` are left out
// (the caller found them missing or of the wrong size). Only reads. One finding per mismatch.
std::vector<VerifyFinding> verify_tasks(const run::RunPlan& plan, const RankTarget& target,
                                        io::InputFiles& inputs, const io::CopyOptions& copy,
                                        InputCheck* check);

}  // namespace z2f::driver
