// How DeepSpeed cuts the trainable parameters into per-rank partitions, computed forward as the
// engine does when it saves (docs/deepspeed-format.md §5). W = world size.
//
// Stage 1/2 (one flat group per optimizer param group g; no round-robin, the default):
//   A_g       = sum of numel over the group's trainable params, in group order, unpadded
//   aligned_g = 2W * ceil(A_g / 2W)          (nccl_start_alignment_factor 2)
//   P_g       = aligned_g / W                 rank r owns flat [r*P_g, (r+1)*P_g)
//   pad_r     = clamp((r+1)*P_g - A_g, 0, P_g)
//   saved     = partition[: P_g - pad_r]      (a view of the P_g-element partition storage)
//
// Stage 3 (per-parameter partitions, greedy sub-groups per param group):
//   P_p       = ceil(numel_p / W)             rank r holds elements [r*P_p, min((r+1)*P_p, n))
//                                              of p, then zeros up to P_p
//   sub-group = params appended in group order until sum P_p >= sub_group_size, or the
//               group's last param; a group whose whole sum is below it is one sub-group
//   T_j       = sum of P_p over the sub-group, the same on every rank
#pragma once

#include <cstdint>
#include <vector>

#include "synth/model_spec.hpp"

namespace z2f::synth {

// What one rank holds of one parameter: elements [first, first + count) of it, at offset
// `offset` of the rank-local flat tensor.
struct Fragment {
    std::size_t param = 0;  // index into ModelSpec::params
    std::uint64_t first = 0;
    std::uint64_t count = 0;
    std::uint64_t offset = 0;
};

struct FlatGroup {
    std::vector<std::size_t> params;  // indices into ModelSpec::params, flat order
    std::uint64_t numel = 0;          // A_g
    std::uint64_t aligned = 0;        // aligned_g
    std::uint64_t partition = 0;      // P_g

    std::uint64_t padding(std::uint32_t rank) const noexcept;       // pad_r
    std::uint64_t saved_length(std::uint32_t rank) const noexcept;  // P_g - pad_r
};

struct Stage2Layout {
    std::uint32_t world = 1;
    std::vector<FlatGroup> groups;
};

Stage2Layout stage2_layout(const ModelSpec& spec, std::uint32_t world);

// The params overlapping rank `rank`'s partition of `group`, in flat order, with their offsets
// inside that partition (param_slice_mappings; the content of the partition).
std::vector<Fragment> stage2_fragments(const ModelSpec& spec, const FlatGroup& group,
                                       std::uint32_t rank);

struct SubGroup {
    int param_group = 0;
    std::vector<std::size_t> params;     // indices into ModelSpec::params
    std::vector<std::uint64_t> slots;    // P_p per param
    std::vector<std::uint64_t> offsets;  // offset of each slot inside the sub-group flat
    std::uint64_t total = 0;             // T_j
};

struct Stage3Layout {
    std::uint32_t world = 1;
    std::vector<SubGroup> subgroups;
};

// ceil(n / world), DeepSpeed's per-rank partition size of an n-element parameter.
std::uint64_t stage3_slot(std::uint64_t numel, std::uint32_t world) noexcept;

Stage3Layout stage3_layout(const ModelSpec& spec, std::uint32_t world,
                           std::uint64_t sub_group_size);

// The real elements rank `rank` holds of an n-element parameter partitioned over `world`
// ranks (the rest of its slot is padding): [first, first + count).
Fragment stage3_fragment(std::uint64_t numel, std::uint32_t world, std::uint32_t rank) noexcept;

}  // namespace z2f::synth
