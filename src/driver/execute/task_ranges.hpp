// What a task hands to the copy engine, as pure functions of the plan (tested without I/O in
// tests/unit/task_ranges_test.cpp): the pieces of its byte range in file order, the reads its
// copies make, and the spans of input bytes a rank's tasks read, which the engine samples to
// tell cached inputs from cold ones.
#pragma once

#include <vector>

#include "io/direct_copier.hpp"
#include "output/output_layout.hpp"
#include "run/run_plan.hpp"
#include "run/task_parts.hpp"

namespace z2f::driver {

// The pieces of `task`'s range in file order: its clipped fixed regions, its slot parts (piece
// i of kind kSlot is `parts[i]`) and the CRC-dependent regions of a torch zip (`tail`), which a
// file written by one task streams and a shared file's lead patches. Where an empty slot and a
// fixed region start at one offset, the slot comes first.
std::vector<io::RangePiece> range_pieces(const output::OutputFileLayout& layout,
                                         const plan::WriteTask& task,
                                         const std::vector<run::SlotPart>& parts,
                                         const std::vector<output::TailPlacement>& tail);

// The reads of a task's copies, extent by extent, in copy order.
std::vector<io::ReadRange> task_reads(const std::vector<io::SlotCopy>& copies);

// The bytes `mine` (a rank's tasks) read, as one span per task, slot and input file (a
// row-parallel weight's rows in one shard are one span): a few spans however many extents.
std::vector<io::ReadRange> read_spans(const run::RunPlan& plan,
                                      const std::vector<const plan::WriteTask*>& mine);

}  // namespace z2f::driver
