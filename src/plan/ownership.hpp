// Which rank writes what: output files cut into write tasks, tasks assigned to ranks.
//
// Every output file starts as one task covering all its tensor slots. While there are fewer
// tasks than ranks, the largest task that holds at least two tensors is cut in two at the tensor
// boundary nearest its byte midpoint (so `--max-shard-size none`, or more ranks than shards,
// still keeps every rank busy: several ranks pwrite into one file). Tasks are then assigned
// largest first to the least-loaded rank. Ties break on file index, then first tensor, then
// rank number, so every rank computes the same assignment.
//
// The first task of a file (its lead) also writes the file's fixed regions and, for torch zip
// files, the CRC-dependent tail; a file is renamed to its final name by its lead once every task
// of the file is on disk.
#pragma once

#include <cstdint>
#include <vector>

namespace z2f::plan {

// What ownership needs to know about one output file: the byte size of each tensor slot, in
// file order.
struct FileWork {
    std::vector<std::uint64_t> slot_bytes;
};

struct WriteTask {
    std::uint32_t file = 0;
    std::uint32_t slot_begin = 0;  // [slot_begin, slot_end) of the file's slots
    std::uint32_t slot_end = 0;
    std::uint64_t bytes = 0;
    std::uint32_t rank = 0;
    bool lead = false;  // first task of its file
};

struct Ownership {
    std::vector<WriteTask> tasks;  // ordered by (file, slot_begin)
    // Number of tasks per file; a file with more than one is written by several ranks.
    std::vector<std::uint32_t> tasks_per_file;
    std::vector<std::uint64_t> bytes_per_rank;
};

Ownership assign_ownership(const std::vector<FileWork>& files, std::uint32_t ranks);

}  // namespace z2f::plan
