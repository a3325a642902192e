// What the execute phase shares between its ranks' work (execute/direct_executor.hpp) and its
// collective steps (execute/execute_phase.hpp): where a rank writes, what it did (for the clean-up
// after a failure), the input CRC check's pieces, and the files several ranks write.
//
// A file written by several tasks (ranks) is written under its temp name by each; its lead
// finishes it once all ranks agree (finalize_shared_file): the CRC tail of a torch zip from
// every rank's slot CRCs, fsync, rename. --verify compares such a tail the same way
// (verify_shared_tails).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "io/direct_copier.hpp"
#include "io/input_files.hpp"
#include "mpi/communicator.hpp"
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

// Records the CRCs of a task's slot parts (`crcs`, one per part) when its file is a shared
// torch zip file.
void note_shared_crcs(const plan::WriteTask& task, const output::OutputFileLayout& layout,
                      const std::vector<run::SlotPart>& parts, std::span<const std::uint32_t> crcs,
                      ExecuteReport& report);

// Each slot's CRC-32 of file `file`, joined from its parts in `all_crcs` (every rank's); an
// internal error when the parts do not tile every slot.
std::vector<std::uint32_t> join_slot_crcs(const run::OutputFileRecord& record, std::uint32_t file,
                                          const std::vector<SlotCrc>& all_crcs);

// Every rank's slot CRCs of shared files, on every rank (collective).
std::vector<SlotCrc> gather_slot_crcs(const mpi::Communicator& comm,
                                      const std::vector<SlotCrc>& mine);

// The copy engine's options as the run's options ask (buffer, block, read mode, --io).
io::DirectCopyOptions copy_options(const Options& options);

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

// Lead of shared torch zip files not marked `skip`: compares each one's CRC tail (from every
// rank's slot CRCs) with the file. Only reads.
std::vector<VerifyFinding> verify_shared_tails(const run::RunPlan& plan, const RankTarget& target,
                                               const std::vector<SlotCrc>& all_crcs);

}  // namespace z2f::driver
