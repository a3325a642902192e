// Hand-built CheckpointMeta for plan tests: no files, just the facts the planner reads. Every
// fp32 master partition is placed at a distinct offset of its optimizer "file" so that an
// extent can be decoded back into (rank, element) pairs and checked against the formulas.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_meta.hpp"

namespace z2f::testing {

struct SyntheticParam {
    std::string name;
    std::vector<std::uint64_t> shape;
};

// Stage 1/2 (padding stripped, like DeepSpeed) or BF16_Optimizer (padding kept).
checkpoint::CheckpointMeta synthetic_stage12(std::uint32_t world,
                                             const std::vector<std::vector<SyntheticParam>>& groups,
                                             bool bf16_optimizer = false);

// Stage 3: one flat partition per sub-group and rank, each sub-group padded per parameter.
checkpoint::CheckpointMeta synthetic_stage3(
    std::uint32_t world, const std::vector<std::vector<SyntheticParam>>& subgroups);

// Base file offset of master tensor `group` of rank `rank` in synthetic metas (4-byte elements).
std::uint64_t synthetic_master_offset(std::uint32_t rank, std::size_t group);

std::uint64_t numel_of(const std::vector<std::uint64_t>& shape);

// A 1-D fp32 tensor of `numel` elements stored at `offset` of input `file`.
checkpoint::TensorRef f32_ref(std::uint32_t file, std::uint64_t numel, std::uint64_t offset = 0);

}  // namespace z2f::testing
