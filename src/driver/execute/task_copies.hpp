// What a write task hands to the copy engine (io/direct_copier.hpp): the copies of its slot
// parts, and the input check's extra reads (execute/direct_executor.hpp; the extra reads are the
// execute phase's, execute/executor.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "driver/execute/executor.hpp"
#include "io/direct_copier.hpp"
#include "run/run_plan.hpp"
#include "run/task_parts.hpp"

namespace z2f::driver {

// The copies of a task's slot parts; `parts` owns the extents the copies point into.
std::vector<io::SlotCopy> slot_copies(const run::RunPlan& plan, const plan::WriteTask& task,
                                      const std::vector<run::SlotPart>& parts,
                                      const InputCheck* check);

// This rank's tasks of the files not skipped, smallest first: if the run is interrupted (time
// limit, full disk), the most files are complete and --resume has the least left to do.
std::vector<const plan::WriteTask*> tasks_to_write(const run::RunPlan& plan, std::uint32_t rank);

// OUT_DIR/<file name>: where a complete file goes.
std::string final_path(const std::string& output_dir, const run::OutputFileRecord& file);

// This rank's check pieces that no copy reads, read with the copier's checksum().
inline void read_extra_pieces(io::DirectCopier& copier, std::uint32_t rank, InputCheck& check,
                              const std::vector<InputRecord>& records) {
    for (std::size_t p = 0; p < check.plan.pieces.size(); ++p) {
        const run::CheckPiece& piece = check.plan.pieces[p];
        if (piece.rank == rank && piece.extra_read) {
            check.piece_crcs[p] =
                copier.checksum({records.at(piece.record).file, piece.offset, piece.length});
        }
    }
}

}  // namespace z2f::driver
