// What a universal checkpoint of a ZeRO checkpoint must hold, computed for tests from the
// checkpoint's own flat tensors by the partitioning arithmetic alone, independently of the
// production plan (plan/consolidation, plan/universal_plan):
//
//   stage 1/2, BF16_Optimizer  group g's flat vector is the concatenation, in rank order, of
//                              every rank's saved tensor of that group (masters cut to their
//                              partition or padded, moments padded: padding only at the end);
//                              a parameter is the next numel elements in param_shapes order
//   stage 3                    in sub-group j each parameter takes ceil(n/W) elements of every
//                              rank's flat tensor, in param_shapes order; rank r holds elements
//                              [r*c, min((r+1)*c, n)) of it, c = ceil(n/W)
//
// Only where each rank's flat tensors lie is taken from the metadata (CheckpointMeta).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_meta.hpp"

namespace z2f::testing {

struct ExpectedUniversalParam {
    std::string name;
    std::vector<std::uint64_t> shape;  // as the file stores it: (1,) for 0-dim, flat at stage 3
    // float32 bytes of the fp32 master, exp_avg and exp_avg_sq.
    std::array<std::vector<std::byte>, 3> streams;
};

// Every trainable parameter of param_shapes, group by group.
std::vector<ExpectedUniversalParam> expected_universal_params(
    const checkpoint::CheckpointMeta& meta);

}  // namespace z2f::testing
