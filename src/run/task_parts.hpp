// What one write task writes, in file order: the parts of the file's fixed regions, tensor
// slots and CRC-dependent regions that fall in its byte range [begin, end).
//
// A task's range tiles its file with the other tasks' (plan/ownership.hpp), so a slot at a cut
// is written in two parts by two ranks: each part is a run of whole output elements
// ([skip, skip + length) of the slot's bytes) whose source is the matching run of source
// elements (plan::part_extents). A torch zip slot's CRC-32 is then the join of its parts'
// (crc32_join), by the file's lead.
//
//   file    | fixed | slot 0 ......... | fixed | slot 1 .......... | tail |
//   tasks   [ task 0 (lead)    )[ task 1                              )
//   parts     fixed, slot 0 [0, a)     slot 0 [a, end), fixed, slot 1, tail
//
// Pure: the copy engine (io::DirectCopier), the input check, the in-memory reader and --verify
// take their ranges from here.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/extent.hpp"
#include "output/output_layout.hpp"
#include "run/run_plan.hpp"

namespace z2f::run {

struct SlotPart {
    std::uint32_t slot = 0;    // index into the layout's slots
    std::uint64_t offset = 0;  // file offset of the part's first byte
    std::uint64_t skip = 0;    // bytes of the slot before the part
    std::uint64_t length = 0;  // output bytes
    bool whole = false;        // the part is the whole slot
    // The source bytes of exactly this part (the tensor's own extents when whole).
    std::vector<SourceExtent> extents;
    // An averaged tensor's replicas, cut like `extents` (which is then empty).
    std::vector<std::vector<SourceExtent>> replicas;
};

// The parts of the task's slots, in slot order.
std::vector<SlotPart> slot_parts(const RunPlan& plan, const plan::WriteTask& task);

// The bytes of `region` in [begin, end), with their file offset.
struct ClippedRegion {
    std::uint64_t offset = 0;
    std::span<const std::byte> bytes;
};
std::vector<ClippedRegion> clip_regions(const std::vector<output::FixedRegion>& regions,
                                        std::uint64_t begin, std::uint64_t end);

}  // namespace z2f::run
