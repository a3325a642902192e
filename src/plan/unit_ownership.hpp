// Ownership by units: write tasks that come in groups one rank writes together, balanced by
// bytes. Universal output (docs/universal-checkpoint.md §1) gives each rank a set of parameters:
// a parameter's files (fp32, exp_avg, exp_avg_sq, step) form one unit, so that one rank reads
// all three of its streams and every file has a single writer; a large byte copy is cut into
// pieces that are units of their own, like the tensor ranges of a shared Hugging Face shard.
//
// Two assignments are computed, and the first is taken when it balances (nearly) as well:
//   - contiguous runs: the units in their order (the planner lists parameters in the order
//     the optimizer files hold them), rank 0 the first run, rank 1 the next, ..., each run as
//     light as `ranks` runs allow (the smallest limit under which cutting a run before the unit
//     that would pass it leaves at most `ranks` runs; found by bisection). A rank then reads
//     one stretch of each input file, and only the 4 KiB pages at the ends of the stretches
//     hold bytes of two ranks: direct reads, which move whole pages, read each such page twice
//     (once per rank), so the fewer the boundaries the closer bytes read come to bytes needed;
//   - largest weight first to the least-loaded rank (ties: the unit's index, then the lower
//     rank), which balances better when a few units are large (an embedding among few layers)
//     but scatters neighbouring parameters over the ranks.
// The runs win when their heaviest rank carries at most 1 % more than largest-first's. Both
// depend only on the units, so every rank computes the same assignment. A unit's weight is what
// it costs to write (its files' bytes, headers included), which is not always its tasks' slot
// bytes (a file of known bytes has no slot at all).
#pragma once

#include <cstdint>
#include <vector>

#include "plan/ownership.hpp"

namespace z2f::plan {

struct OwnershipUnit {
    // Each task's file, byte range, slot range and slot bytes; `rank` and `lead` are filled in.
    std::vector<WriteTask> tasks;
    std::uint64_t weight = 0;
};

// `files` is the number of output files the tasks refer to; every file must have at least one
// task, and the tasks of a file must tile its slots and its bytes in order (checked: a bug
// otherwise; the caller cuts shared files at block multiples, ownership.hpp says why). The
// result's tasks are ordered by (file, begin); the first task of each file is its lead.
// bytes_per_rank counts unit weights.
Ownership assign_unit_ownership(const std::vector<OwnershipUnit>& units, std::uint32_t files,
                                std::uint32_t ranks);

}  // namespace z2f::plan
