// Which rank writes what: output files cut into write tasks, tasks assigned to ranks.
//
// A write task is a byte range [begin, end) of one output file; the tasks of a file tile it in
// order, and a task writes every byte of its range (the fixed bytes and the parts of the tensor
// slots that fall in it). Ranks get equal shares of the tensor bytes: the files' tensor bytes
// are laid end to end, in file order, and cut into `ranks` shares, rank k from byte
// k * total / ranks on. A share that ends inside a file cuts the file at the block multiple
// nearest that byte, so that several ranks share a large file (`--max-shard-size none`, more
// ranks than shards, or a 4.9 GB shard next to a 1 GB one at 2 ranks) and even one huge tensor
// is written by several ranks. Cutting at block multiples means no two ranks ever write the
// same block of a shared file: each rank's direct-I/O blocks start at its range's aligned
// beginning (the block size is an input of the plan, the same on every rank). A cut never
// falls inside an element (a 1-byte bool buffer can leave a later 2-byte slot at an odd
// offset): such a block boundary is passed over for the nearest clean one. A range spanning
// fewer than two blocks, or one whose cut would leave a part without tensor bytes, is not cut:
// it goes whole to the rank whose share holds more of it (a tie: the earlier rank, so a small
// model's single file goes to rank 0). Shares are positions, not amounts,
// so a cut that lands off the exact byte moves only the next rank's start. Each rank thus
// writes one stretch of the files, ranks in file order; where cuts fall cleanly no rank carries
// more than a share and a block; and the result depends on nothing but the files, the rank
// count and the block size: every rank computes the same assignment. (Largest-first
// assignment of whole files, the earlier rule, left a rank with 82 % of a 6 GB model at 2
// ranks and with 10 GB where 7.8 GB was the share for 100 shards of 5 GB over 64 ranks.)
//
// The first task of a file (its lead, begin == 0) renames the file to its final name once every
// task of the file is on disk and, for torch zip files shared by several ranks, writes the
// bytes that depend on every slot's CRC-32 (data descriptors, central directory) then.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace z2f::plan {

// One tensor slot of an output file: where its bytes lie and the size of one element (a cut
// inside a slot must fall on an element boundary).
struct SlotWork {
    std::uint64_t offset = 0;
    std::uint64_t length = 0;
    std::uint32_t item = 1;
};

// What ownership needs to know about one output file: its size and its tensor slots, in file
// order (ascending offsets, not overlapping).
struct FileWork {
    std::uint64_t size = 0;
    std::vector<SlotWork> slots;
};

struct WriteTask {
    std::uint32_t file = 0;
    std::uint64_t begin = 0;  // [begin, end) of the file's bytes
    std::uint64_t end = 0;
    std::uint32_t slot_begin = 0;  // [slot_begin, slot_end): the slots with bytes in the range
    std::uint32_t slot_end = 0;
    std::uint64_t bytes = 0;  // tensor bytes in the range
    std::uint32_t rank = 0;
    bool lead = false;  // first task of its file
};

struct Ownership {
    std::vector<WriteTask> tasks;  // ordered by (file, begin)
    // Number of tasks per file; a file with more than one is written by several ranks.
    std::vector<std::uint32_t> tasks_per_file;
    std::vector<std::uint64_t> bytes_per_rank;
};

// `block_size` > 0: where shared files may be cut.
Ownership assign_ownership(const std::vector<FileWork>& files, std::uint32_t ranks,
                           std::uint64_t block_size);

// The slots of `file` that belong to bytes [begin, end): those with bytes inside the range,
// and the empty ones at an offset in [begin, end) (or at the file's end, when `end` is it).
// As [first, last) slot indices.
std::pair<std::uint32_t, std::uint32_t> slots_in_range(const FileWork& file, std::uint64_t begin,
                                                       std::uint64_t end);

// Tensor bytes of `file` in [begin, end).
std::uint64_t slot_bytes_in_range(const FileWork& file, std::uint64_t begin, std::uint64_t end);

}  // namespace z2f::plan
