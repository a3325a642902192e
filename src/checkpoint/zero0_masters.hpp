// The fp32 master weights of a 16-bit run without ZeRO partitions (ZeRO stage 0 with bf16 or
// fp16), and which module parameter each belongs to (docs/deepspeed-format.md §12).
//
// Without ZeRO, DeepSpeed wraps the torch optimizer in FP16_UnfusedOptimizer or, for fused Adam
// kernels, FP16_Optimizer (bf16 runs too). The wrapper's state_dict() is the model file's
// `optimizer`, and it holds the masters:
//
//   optimizer['fp32_groups']       FP16_UnfusedOptimizer: one list per optimizer param group of
//                                  one tensor per trainable parameter of the group, in the
//                                  group's order, each with the parameter's shape
//   optimizer['fp32_groups_flat']  FP16_Optimizer: one 1-D tensor per param group, the group's
//                                  trainable parameters flattened and concatenated in the
//                                  group's order, without padding
//
// Neither names a parameter, and the param groups are the caller's (model.parameters() in
// module order by default; a weight-decay split lists each kind in module order). What ties a
// master to its parameter: the module copy is the master rounded to the module's dtype after
// every step (the wrapper copies fp32 -> 16 bits), so the two agree bit for bit. The mapping:
//
//   candidates   module entries that are not buffers (buffer_names) and not a later name of
//                an earlier entry's bytes (a tied weight, held once by the optimizer)
//   fp32_groups  each master goes to a candidate of its shape; where a shape has more
//                candidates than masters of that shape left, masters take, in order, the first
//                remaining candidate in module order whose first elements the master rounds to
//                (at most kSampleElements of them are read); bitwise-equal 16-bit candidates
//                are taken in module order
//   flat groups  candidates in module order, each group a cursor: a candidate joins the group
//                whose next elements round to it, the only one; none: the candidate is frozen.
//                Every group must end exactly at its last parameter
//   every master must find a parameter; candidates left over are frozen parameters (kept in
//   their 16-bit module copy)
// A mapping that cannot be made is refused, naming the file, the master and what was expected.
// A model file without either key has no masters (an fp32 run, or one saved without them).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/parallel_meta.hpp"
#include "container/torch_file.hpp"

namespace z2f::checkpoint {

// Elements of a master and its candidate compared when several candidates share a shape.
inline constexpr std::uint64_t kSampleElements = 4096;

// The rule above without files, for the tests: `rounds_to(m, e, c)` tells whether master m
// (fp32_groups: the m-th tensor over all groups; flat: group m), from its element e on, rounds
// to candidate c's first elements. `path` names the file in errors.
struct MasterCandidate {
    std::string name;
    std::vector<std::uint64_t> shape;
    std::uint64_t numel = 0;
};
using RoundsTo =
    std::function<bool(std::size_t master, std::uint64_t element, std::size_t candidate)>;
// The candidate of every master of fp32_groups (masters listed group after group).
std::vector<std::size_t> map_master_tensors(const std::string& path,
                                            const std::vector<std::vector<std::uint64_t>>& shapes,
                                            const std::vector<MasterCandidate>& candidates,
                                            const RoundsTo& rounds_to);
// Where every candidate lies in fp32_groups_flat: (group, element offset), or nullopt when the
// candidate is frozen.
struct FlatPlace {
    std::size_t group = 0;
    std::uint64_t element = 0;
};
std::vector<std::optional<FlatPlace>> map_flat_masters(
    const std::string& path, const std::vector<std::uint64_t>& lengths,
    const std::vector<MasterCandidate>& candidates, const RoundsTo& rounds_to);

// Reads optimizer['fp32_groups'] or ['fp32_groups_flat'] of a model-states file whose `module`
// has been read into `model`, and maps the masters to its parameters (reading the few elements
// the rule above compares).
Zero0Masters read_zero0_masters(const container::TorchFile& file, const ModelStatesInfo& model,
                                std::uint32_t file_index);

}  // namespace z2f::checkpoint
