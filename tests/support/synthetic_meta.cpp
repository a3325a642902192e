#include "support/synthetic_meta.hpp"

namespace z2f::testing {
namespace {

checkpoint::CheckpointMeta skeleton(std::uint32_t world, bool per_rank_models) {
    checkpoint::CheckpointMeta meta;
    meta.world_size = world;
    std::uint32_t models = per_rank_models ? world : 1;
    for (std::uint32_t r = 0; r < models; ++r) {
        std::string path = per_rank_models
                               ? "zero_pp_rank_" + std::to_string(r) + "_mp_rank_00_model_states.pt"
                               : "mp_rank_00_model_states.pt";
        meta.files.model_files.push_back(path);
        meta.inputs.push_back(path);
        meta.input_sizes.push_back(std::uint64_t{1} << 40);
    }
    meta.files.per_rank_model_files = per_rank_models;
    for (std::uint32_t r = 0; r < world; ++r) {
        std::string path = "zero_pp_rank_" + std::to_string(r) + "_mp_rank_00_optim_states.pt";
        meta.files.optim_files.push_back(path);
        meta.inputs.push_back(path);
        meta.input_sizes.push_back(std::uint64_t{1} << 40);
    }
    meta.model.has_buffer_names = true;
    meta.model.shared_params = std::vector<std::pair<std::string, std::string>>{};
    meta.frozen_fragments_by_rank.resize(models);
    return meta;
}

checkpoint::TensorRef master(std::uint32_t file, std::uint32_t rank, std::size_t group,
                             std::uint64_t numel) {
    checkpoint::TensorRef ref;
    ref.file = file;
    ref.dtype = DType::kF32;
    ref.shape = {numel};
    ref.numel = numel;
    ref.offset = synthetic_master_offset(rank, group);
    ref.length = numel * 4;
    return ref;
}

}  // namespace

std::uint64_t numel_of(const std::vector<std::uint64_t>& shape) {
    std::uint64_t n = 1;
    for (auto d : shape)
        n *= d;
    return n;
}

std::uint64_t synthetic_master_offset(std::uint32_t rank, std::size_t group) {
    // Far apart, and never adjacent, so every extent belongs to exactly one partition.
    return (std::uint64_t{rank} << 32) + (std::uint64_t{group} << 24) + 4096;
}

checkpoint::CheckpointMeta synthetic_stage12(std::uint32_t world,
                                             const std::vector<std::vector<SyntheticParam>>& groups,
                                             bool bf16_optimizer) {
    checkpoint::CheckpointMeta meta = skeleton(world, false);
    meta.layout = bf16_optimizer ? checkpoint::MasterLayout::kPaddedGroups
                                 : checkpoint::MasterLayout::kFlatGroups;
    meta.zero_stage = bf16_optimizer ? 1 : 2;
    meta.optim.resize(world);
    std::vector<std::vector<checkpoint::NamedShape>> shapes;
    for (std::size_t g = 0; g < groups.size(); ++g) {
        std::vector<checkpoint::NamedShape> named;
        std::uint64_t total = 0;
        for (const auto& p : groups[g]) {
            named.push_back({p.name, p.shape});
            total += numel_of(p.shape);
        }
        shapes.push_back(named);
        // DeepSpeed: align to 2W, split into W partitions of P, strip trailing padding.
        std::uint64_t align = 2 * std::uint64_t{world};
        std::uint64_t aligned = (total + align - 1) / align * align;
        std::uint64_t part = aligned / world;
        for (std::uint32_t r = 0; r < world; ++r) {
            std::uint64_t begin = std::min(total, std::uint64_t{r} * part);
            std::uint64_t saved = bf16_optimizer ? part : std::min(part, total - begin);
            meta.optim[r].layout = meta.layout;
            meta.optim[r].partition_count = {world};
            meta.optim[r].master.push_back(master(1 + r, r, g, saved));
        }
    }
    meta.model.param_shapes = shapes;
    return meta;
}

checkpoint::CheckpointMeta synthetic_stage3(
    std::uint32_t world, const std::vector<std::vector<SyntheticParam>>& subgroups) {
    checkpoint::CheckpointMeta meta = skeleton(world, true);
    meta.layout = checkpoint::MasterLayout::kPerParam;
    meta.zero_stage = 3;
    meta.optim.resize(world);
    std::vector<std::vector<checkpoint::NamedShape>> shapes;
    for (std::size_t j = 0; j < subgroups.size(); ++j) {
        std::vector<checkpoint::NamedShape> named;
        std::uint64_t length = 0;
        for (const auto& p : subgroups[j]) {
            named.push_back({p.name, p.shape});
            length += (numel_of(p.shape) + world - 1) / world;
        }
        shapes.push_back(named);
        for (std::uint32_t r = 0; r < world; ++r) {
            meta.optim[r].layout = meta.layout;
            meta.optim[r].partition_count = {world};
            meta.optim[r].master.push_back(master(world + r, r, j, length));
        }
    }
    meta.model.param_shapes = shapes;
    return meta;
}

checkpoint::TensorRef f32_ref(std::uint32_t file, std::uint64_t numel, std::uint64_t offset) {
    checkpoint::TensorRef ref;
    ref.file = file;
    ref.dtype = DType::kF32;
    ref.shape = {numel};
    ref.numel = numel;
    ref.offset = offset;
    ref.length = numel * 4;
    return ref;
}

}  // namespace z2f::testing
