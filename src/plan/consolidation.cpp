#include "plan/consolidation.hpp"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "common/checked_math.hpp"
#include "common/errors.hpp"

namespace z2f::plan {
namespace {

std::string shape_text(const std::vector<std::uint64_t>& shape) {
    std::string out = "(";
    for (std::size_t i = 0; i < shape.size(); ++i) {
        out += (i == 0 ? "" : ", ") + std::to_string(shape[i]);
    }
    return out + ")";
}

// A 1-D sequence of tensors read as one: a rank's fp32 flat groups, or a partition list.
// Maps a range of its elements to byte extents of the underlying tensors.
class ConcatenatedSource {
  public:
    void append(const checkpoint::TensorRef& ref) {
        if (!parts_.empty() && ref.dtype != parts_.front().dtype) {
            throw_internal_error("concatenating tensors of different dtypes");
        }
        parts_.push_back(ref);
        starts_.push_back(total_);
        total_ += ref.numel;
    }
    std::uint64_t numel() const noexcept { return total_; }

    // Appends the extents holding elements [begin, begin + count).
    void extents(std::uint64_t begin, std::uint64_t count, std::vector<SourceExtent>& out) const {
        if (count == 0) {
            return;
        }
        auto it = std::upper_bound(starts_.begin(), starts_.end(), begin);
        std::size_t part = static_cast<std::size_t>(it - starts_.begin()) - 1;
        while (count > 0) {
            const checkpoint::TensorRef& ref = parts_[part];
            std::uint64_t local = begin - starts_[part];
            std::uint64_t take = std::min(count, ref.numel - local);
            std::uint64_t item = dtype_size(ref.dtype);
            if (take > 0) {
                SourceExtent extent{ref.file, ref.offset + local * item, take * item};
                // Neighbouring ranges of one file merge into one extent.
                if (!out.empty() && out.back().file == extent.file &&
                    out.back().offset + out.back().length == extent.offset) {
                    out.back().length += extent.length;
                } else {
                    out.push_back(extent);
                }
            }
            begin += take;
            count -= take;
            ++part;
        }
    }

  private:
    std::vector<checkpoint::TensorRef> parts_;
    std::vector<std::uint64_t> starts_;
    std::uint64_t total_ = 0;
};

class Planner {
  public:
    Planner(const checkpoint::CheckpointMeta& meta, const PlanOptions& options)
        : meta_(meta), options_(options), world_(meta.world_size) {}

    ConsolidationPlan run() {
        for (std::size_t i = 0; i < meta_.inputs.size(); ++i) {
            result_.plan.inputs.push_back({meta_.inputs[i], meta_.input_sizes[i]});
        }
        collect_aliases();
        add_buffers();
        if (!options_.exclude_frozen) {
            add_frozen();
        }
        if (meta_.layout == checkpoint::MasterLayout::kWholeParams) {
            add_trainable_whole();
        } else if (meta_.layout == checkpoint::MasterLayout::kPerParam) {
            add_trainable_stage3();
        } else {
            add_trainable_stage12();
        }
        add_aliases();
        return std::move(result_);
    }

  private:
    const std::string& model_path() const { return meta_.files.model_files.front(); }

    // Stage 3, or a universal checkpoint made from one: frozen parameters are split over the
    // per-rank model files and the module holds only placeholders.
    bool per_rank_parameters() const {
        return meta_.layout == checkpoint::MasterLayout::kPerParam ||
               (meta_.layout == checkpoint::MasterLayout::kWholeParams &&
                meta_.files.per_rank_model_files);
    }

    std::size_t add(PlannedTensor tensor, const std::string& origin) {
        auto [it, inserted] = index_.emplace(tensor.name, result_.plan.tensors.size());
        if (!inserted) {
            throw_input_error(origin, "tensor name '" + tensor.name + "' appears twice (as " +
                                          role_name(result_.plan.tensors[it->second].role) +
                                          " and as " + role_name(tensor.role) + ")");
        }
        result_.plan.tensors.push_back(std::move(tensor));
        return result_.plan.tensors.size() - 1;
    }

    static std::string role_name(TensorRole role) {
        switch (role) {
            case TensorRole::kBuffer:
                return "buffer";
            case TensorRole::kFrozen:
                return "frozen parameter";
            case TensorRole::kTrainable:
                return "trainable parameter";
            case TensorRole::kAlias:
                return "tied alias";
        }
        return "tensor";
    }

    DType floating_output(DType source) const {
        return is_floating(source) ? options_.dtype : source;
    }

    // shared_params, or for old stage-1/2 files without it, module entries that view exactly
    // the same bytes as a trainable parameter (DeepSpeed 0.9.0-0.9.1 inferred ties this way).
    void collect_aliases() {
        const checkpoint::ModelStatesInfo& model = meta_.model;
        if (model.shared_params) {
            aliases_ = *model.shared_params;
        } else if (!per_rank_parameters()) {
            std::unordered_set<std::string> trainable;
            for (const auto& group : *model.param_shapes) {
                for (const auto& [name, shape] : group)
                    trainable.insert(name);
            }
            std::vector<const checkpoint::NamedTensor*> owners;
            for (const auto& entry : model.module_tensors) {
                if (trainable.count(entry.name) != 0 && entry.tensor.numel > 0) {
                    owners.push_back(&entry);
                }
            }
            for (const auto& entry : model.module_tensors) {
                if (trainable.count(entry.name) != 0 || entry.tensor.numel == 0)
                    continue;
                for (const checkpoint::NamedTensor* owner : owners) {
                    if (owner->tensor == entry.tensor) {
                        aliases_.emplace_back(entry.name, owner->name);
                        break;
                    }
                }
            }
            if (!aliases_.empty()) {
                result_.notes.push_back("no shared_params in " + model_path() + ": " +
                                        std::to_string(aliases_.size()) +
                                        " tied parameter(s) inferred from shared module storage");
            }
        } else {
            result_.notes.push_back("no shared_params in " + model_path() +
                                    " (DeepSpeed < 0.9.2): tied parameters cannot be recovered "
                                    "from a ZeRO-3 checkpoint and are not exported");
        }
        for (const auto& [alias, owner] : aliases_)
            alias_names_.insert(alias);
    }

    void add_buffers() {
        const checkpoint::ModelStatesInfo& model = meta_.model;
        std::unordered_set<std::string> names(model.buffer_names.begin(), model.buffer_names.end());
        for (const auto& entry : model.module_tensors) {
            if (names.count(entry.name) == 0)
                continue;
            PlannedTensor tensor;
            tensor.name = entry.name;
            tensor.shape = entry.tensor.shape;
            tensor.role = TensorRole::kBuffer;
            tensor.source_dtype = entry.tensor.dtype;
            tensor.output_dtype =
                options_.cast_all_buffers ? DType::kF32 : floating_output(entry.tensor.dtype);
            if (entry.tensor.length > 0) {
                tensor.extents.push_back(
                    {entry.tensor.file, entry.tensor.offset, entry.tensor.length});
            } else if (checked_numel(entry.tensor.shape).value_or(0) != 0) {
                throw_input_error(model_path(), "buffer '" + entry.name + "' has no data");
            }
            add(std::move(tensor), model_path());
        }
    }

    void add_frozen() {
        const checkpoint::ModelStatesInfo& model = meta_.model;
        if (per_rank_parameters()) {
            if (model.frozen_param_shapes)
                add_frozen_stage3();
            return;
        }
        if (model.frozen_param_shapes) {
            add_frozen_stage2();
            return;
        }
        // No frozen_param_shapes (stage 1, or DeepSpeed < 0.9.1): frozen parameters exist only
        // as the module's low-precision copy.
        std::unordered_set<std::string> known(model.buffer_names.begin(), model.buffer_names.end());
        for (const auto& group : *model.param_shapes) {
            for (const auto& [name, shape] : group)
                known.insert(name);
        }
        std::vector<const checkpoint::NamedTensor*> frozen;
        for (const auto& entry : model.module_tensors) {
            if (known.count(entry.name) == 0 && alias_names_.count(entry.name) == 0) {
                frozen.push_back(&entry);
            }
        }
        if (frozen.empty())
            return;
        if (options_.stage1_frozen == Stage1Frozen::kSkip) {
            result_.warnings.push_back(std::to_string(frozen.size()) +
                                       " frozen parameter(s) without an fp32 master (ZeRO-1) "
                                       "skipped as zero_to_fp32 does (--stage1-frozen skip)");
            return;
        }
        for (const checkpoint::NamedTensor* entry : frozen) {
            PlannedTensor tensor;
            tensor.name = entry->name;
            tensor.shape = entry->tensor.shape;
            tensor.role = TensorRole::kFrozen;
            tensor.source_dtype = entry->tensor.dtype;
            tensor.output_dtype = options_.keep_frozen_dtype ? entry->tensor.dtype
                                                             : floating_output(entry->tensor.dtype);
            if (entry->tensor.length > 0) {
                tensor.extents.push_back(
                    {entry->tensor.file, entry->tensor.offset, entry->tensor.length});
            }
            add(std::move(tensor), model_path());
        }
        result_.notes.push_back(std::to_string(frozen.size()) +
                                " frozen parameter(s) taken from the module's " +
                                std::string(dtype_display_name(frozen.front()->tensor.dtype)) +
                                " copy (ZeRO-1 keeps no other; zero_to_fp32 drops them)");
    }

    void add_frozen_stage2() {
        const auto& fragments = meta_.frozen_fragments_by_rank.front();
        std::unordered_map<std::string, const checkpoint::TensorRef*> by_name;
        for (const auto& fragment : fragments)
            by_name.emplace(fragment.name, &fragment.tensor);
        for (const auto& [name, shape] : *meta_.model.frozen_param_shapes) {
            auto it = by_name.find(name);
            if (it == by_name.end()) {
                throw_input_error(model_path(), "frozen parameter '" + name +
                                                    "' is in frozen_param_shapes but not in "
                                                    "frozen_param_fragments");
            }
            const checkpoint::TensorRef& ref = *it->second;
            std::uint64_t numel = *checked_numel(shape);
            if (ref.numel != numel) {
                throw_input_error(model_path(), "frozen parameter '" + name + "' has shape " +
                                                    shape_text(shape) + " (" +
                                                    std::to_string(numel) +
                                                    " elements) but its fragment holds " +
                                                    std::to_string(ref.numel));
            }
            PlannedTensor tensor;
            tensor.name = name;
            tensor.shape = ref.shape;  // zero_to_fp32 writes the fragment as stored
            tensor.role = TensorRole::kFrozen;
            tensor.source_dtype = ref.dtype;
            tensor.output_dtype =
                options_.keep_frozen_dtype ? ref.dtype : floating_output(ref.dtype);
            if (ref.length > 0)
                tensor.extents.push_back({ref.file, ref.offset, ref.length});
            add(std::move(tensor), model_path());
        }
    }

    void add_frozen_stage3() {
        std::vector<std::unordered_map<std::string, const checkpoint::TensorRef*>> by_rank(world_);
        for (std::uint32_t r = 0; r < world_; ++r) {
            for (const auto& fragment : meta_.frozen_fragments_by_rank[r]) {
                by_rank[r].emplace(fragment.name, &fragment.tensor);
            }
        }
        for (const auto& [name, shape] : *meta_.model.frozen_param_shapes) {
            std::uint64_t numel = *checked_numel(shape);
            std::uint64_t part = stage3_slice(numel, world_, 0).per_rank;
            PlannedTensor tensor;
            tensor.name = name;
            tensor.shape = shape;
            tensor.role = TensorRole::kFrozen;
            for (std::uint32_t r = 0; r < world_; ++r) {
                const std::string& path = meta_.files.model_files[r];
                auto it = by_rank[r].find(name);
                if (it == by_rank[r].end()) {
                    throw_input_error(path,
                                      "frozen_param_fragments has no entry for frozen "
                                      "parameter '" +
                                          name + "'");
                }
                const checkpoint::TensorRef& ref = *it->second;
                if (!is_floating(ref.dtype)) {
                    throw_unsupported(path,
                                      "frozen parameter '" + name + "' is stored as " +
                                          std::string(dtype_display_name(ref.dtype)) +
                                          " (quantized_nontrainable_weights?): not supported");
                }
                if (r == 0) {
                    tensor.source_dtype = ref.dtype;
                } else if (ref.dtype != tensor.source_dtype) {
                    throw_input_error(
                        path, "frozen fragment '" + name + "' has dtype " +
                                  std::string(dtype_display_name(ref.dtype)) + ", rank 0 has " +
                                  std::string(dtype_display_name(tensor.source_dtype)));
                }
                if (ref.numel != part) {
                    throw_input_error(
                        path, "frozen fragment '" + name + "' holds " + std::to_string(ref.numel) +
                                  " elements, expected ceil(" + std::to_string(numel) + " / " +
                                  std::to_string(world_) + ") = " + std::to_string(part));
                }
                std::uint64_t count = stage3_slice(numel, world_, r).count;
                if (count > 0) {
                    std::uint64_t item = dtype_size(ref.dtype);
                    tensor.extents.push_back({ref.file, ref.offset, count * item});
                }
            }
            tensor.output_dtype = options_.keep_frozen_dtype ? tensor.source_dtype
                                                             : floating_output(tensor.source_dtype);
            add(std::move(tensor), model_path());
        }
    }

    DType master_dtype(const std::vector<checkpoint::TensorRef>& refs,
                       const std::string& path) const {
        for (const checkpoint::TensorRef& ref : refs) {
            if (ref.dtype != refs.front().dtype) {
                throw_input_error(path, "fp32 master partitions of different dtypes");
            }
        }
        return refs.empty() ? DType::kF32 : refs.front().dtype;
    }

    // Rank r's flat tensors of the planned stream: its master partitions, or one Adam moment of
    // each group.
    std::vector<checkpoint::TensorRef> stream_groups(std::uint32_t r) const {
        const checkpoint::OptimStatesInfo& optim = meta_.optim[r];
        if (options_.stream == Stream::kMaster) {
            return optim.master;
        }
        std::vector<checkpoint::TensorRef> refs;
        for (std::size_t g = 0; g < optim.master.size(); ++g) {
            const checkpoint::OptimizerGroupState* state =
                g < optim.group_states.size() ? &optim.group_states[g] : nullptr;
            const std::optional<checkpoint::TensorRef>* moment = nullptr;
            if (state != nullptr) {
                moment = options_.stream == Stream::kExpAvg ? &state->exp_avg : &state->exp_avg_sq;
            }
            if (moment == nullptr || !moment->has_value()) {
                throw_input_error(meta_.files.optim_files[r],
                                  "holds no Adam " + std::string(stream_name(options_.stream)) +
                                      " for flat group " + std::to_string(g) +
                                      ": a checkpoint saved without optimizer states, or by "
                                      "another optimizer, has no moments to convert");
            }
            refs.push_back(**moment);
        }
        return refs;
    }

    PlannedTensor trainable(const std::string& name, const std::vector<std::uint64_t>& shape,
                            DType source) const {
        PlannedTensor tensor;
        tensor.name = name;
        tensor.shape = shape;
        tensor.role = TensorRole::kTrainable;
        tensor.source_dtype = source;
        tensor.output_dtype = options_.dtype;
        return tensor;
    }

    void add_trainable_stage12() {
        const auto& shapes = *meta_.model.param_shapes;
        const std::size_t groups = meta_.optim.front().master.size();
        if (shapes.size() != groups) {
            throw_input_error(model_path(), "param_shapes lists " + std::to_string(shapes.size()) +
                                                " parameter groups but the optimizer files hold " +
                                                std::to_string(groups) + " flat groups");
        }
        const std::uint64_t align = 2 * std::uint64_t{world_};
        std::vector<std::vector<checkpoint::TensorRef>> by_rank;
        for (std::uint32_t r = 0; r < world_; ++r) {
            by_rank.push_back(stream_groups(r));
        }
        for (std::size_t g = 0; g < groups; ++g) {
            ConcatenatedSource flat;
            for (std::uint32_t r = 0; r < world_; ++r) {
                const checkpoint::TensorRef& part = by_rank[r][g];
                if (r > 0 && part.dtype != by_rank[0][g].dtype) {
                    throw_input_error(meta_.files.optim_files[r],
                                      "partition of group " + std::to_string(g) + " is " +
                                          std::string(dtype_display_name(part.dtype)) +
                                          ", rank 0's is " +
                                          std::string(dtype_display_name(by_rank[0][g].dtype)));
                }
                flat.append(part);
            }
            const DType source = by_rank[0][g].dtype;
            std::uint64_t offset = 0;
            for (const auto& [name, shape] : shapes[g]) {
                std::uint64_t numel = *checked_numel(shape);
                if (numel > flat.numel() - std::min(offset, flat.numel())) {
                    throw_input_error(model_path(),
                                      "param_shapes of group " + std::to_string(g) +
                                          " need more than the " + std::to_string(flat.numel()) +
                                          " elements the ranks' partitions hold (at parameter '" +
                                          name +
                                          "'): optimizer files from a different run or model?");
                }
                PlannedTensor tensor = trainable(name, shape, source);
                flat.extents(offset, numel, tensor.extents);
                add(std::move(tensor), model_path());
                offset += numel;
            }
            // zero_to_fp32's check, on numbers aligned to 2W (DeepSpeed >= 0.5.2 pads groups
            // to a multiple of 2W elements, and BF16_Optimizer saves that padding).
            std::uint64_t consumed = align * ceil_div(offset, align);
            std::uint64_t available = align * ceil_div(flat.numel(), align);
            if (consumed != available) {
                throw_input_error(meta_.files.optim_files.front(),
                                  "group " + std::to_string(g) + ": consumed " +
                                      std::to_string(consumed) + " numels out of " +
                                      std::to_string(available) +
                                      " - param_shapes and the fp32 partitions disagree");
            }
            // Moments always keep their padding (torch's state of the padded flat partition).
            if (offset != flat.numel() && meta_.layout == checkpoint::MasterLayout::kFlatGroups &&
                options_.stream == Stream::kMaster) {
                result_.warnings.push_back("group " + std::to_string(g) + ": " +
                                           std::to_string(flat.numel() - offset) +
                                           " trailing padding element(s) in the saved partitions "
                                           "(a DeepSpeed 0.5.x checkpoint?) were ignored");
            }
        }
    }

    void add_trainable_stage3() {
        const auto& shapes = *meta_.model.param_shapes;
        std::vector<std::vector<checkpoint::TensorRef>> by_rank;
        for (std::uint32_t r = 0; r < world_; ++r) {
            by_rank.push_back(stream_groups(r));
        }
        const auto& first = by_rank.front();
        const DType source = master_dtype(first, meta_.files.optim_files.front());
        std::vector<ConcatenatedSource> ranks(world_);
        for (std::uint32_t r = 0; r < world_; ++r) {
            const auto& groups = by_rank[r];
            for (std::size_t j = 0; j < groups.size(); ++j) {
                if (groups[j].numel != first[j].numel || groups[j].dtype != first[j].dtype) {
                    throw_input_error(meta_.files.optim_files[r],
                                      "fp32_flat_groups[" + std::to_string(j) + "] holds " +
                                          std::to_string(groups[j].numel) + " elements of " +
                                          std::string(dtype_display_name(groups[j].dtype)) +
                                          ", rank 0's holds " + std::to_string(first[j].numel) +
                                          ": every rank's partition must have the same size");
                }
                ranks[r].append(groups[j]);
            }
        }
        if (shapes.size() != first.size()) {
            // Sub-group boundaries do not matter to the layout (zero_to_fp32 merges them).
            result_.notes.push_back("param_shapes lists " + std::to_string(shapes.size()) +
                                    " sub-groups, the optimizer files " +
                                    std::to_string(first.size()));
        }
        const std::uint64_t per_rank = ranks.front().numel();
        std::uint64_t offset = 0;
        for (const auto& group : shapes) {
            for (const auto& [name, shape] : group) {
                std::uint64_t numel = *checked_numel(shape);
                std::uint64_t part = stage3_slice(numel, world_, 0).per_rank;
                if (part > per_rank - std::min(offset, per_rank)) {
                    offset += part;  // reported below with the totals
                    continue;
                }
                PlannedTensor tensor = trainable(name, shape, source);
                for (std::uint32_t r = 0; r < world_ && numel > 0; ++r) {
                    ranks[r].extents(offset, stage3_slice(numel, world_, r).count, tensor.extents);
                }
                add(std::move(tensor), model_path());
                offset += part;
            }
        }
        if (offset != per_rank) {
            bool empty_partition =
                std::any_of(first.begin(), first.end(),
                            [](const checkpoint::TensorRef& ref) { return ref.numel == 0; });
            if (meta_.files.has_offloaded_tensors || empty_partition) {
                throw_unsupported(
                    meta_.files.optim_files.front(),
                    "fp32 partitions are empty or short and the checkpoint has "
                    "offloaded_tensors/: ZeRO-3 NVMe optimizer offload keeps the fp32 "
                    "master weights in swap files, which are not supported");
            }
            throw_input_error(meta_.files.optim_files.front(),
                              "consumed " + std::to_string(offset * world_) + " numels out of " +
                                  std::to_string(per_rank * world_) +
                                  " - param_shapes and the ZeRO-3 fp32 partitions disagree");
        }
    }

    // A universal checkpoint: parameter i of param_shapes (flattened) is master[i], whole.
    void add_trainable_whole() {
        const auto& masters = meta_.optim.front().master;
        std::size_t index = 0;
        for (const auto& group : *meta_.model.param_shapes) {
            for (const auto& [name, shape] : group) {
                if (index >= masters.size()) {
                    throw_internal_error(
                        "universal metadata lists fewer masters than "
                        "param_shapes");
                }
                const checkpoint::TensorRef& ref = masters[index++];
                if (ref.numel != *checked_numel(shape)) {
                    throw_internal_error("universal master of '" + name +
                                         "' does not match its shape");
                }
                PlannedTensor tensor = trainable(name, shape, ref.dtype);
                if (ref.length > 0) {
                    tensor.extents.push_back({ref.file, ref.offset, ref.length});
                }
                add(std::move(tensor), meta_.inputs.at(ref.file));
            }
        }
    }

    void add_aliases() {
        std::size_t skipped = 0;
        for (const auto& [alias, owner] : aliases_) {
            auto it = index_.find(owner);
            if (it == index_.end()) {
                ++skipped;  // owner excluded (frozen) or absent: zero_to_fp32 skips it too
                continue;
            }
            const PlannedTensor& target = result_.plan.tensors[it->second];
            PlannedTensor tensor;
            tensor.name = alias;
            tensor.shape = target.shape;
            tensor.role = TensorRole::kAlias;
            tensor.source_dtype = target.source_dtype;
            tensor.output_dtype = target.output_dtype;
            tensor.alias_of = static_cast<std::int64_t>(it->second);
            add(std::move(tensor), model_path());
        }
        if (skipped > 0) {
            result_.notes.push_back(std::to_string(skipped) +
                                    " tied alias(es) skipped: their owner is not exported");
        }
    }

    const checkpoint::CheckpointMeta& meta_;
    const PlanOptions& options_;
    const std::uint32_t world_;
    ConsolidationPlan result_;
    std::unordered_map<std::string, std::size_t> index_;
    std::vector<std::pair<std::string, std::string>> aliases_;
    std::unordered_set<std::string> alias_names_;
};

}  // namespace

Stage3Slice stage3_slice(std::uint64_t numel, std::uint32_t world, std::uint32_t rank) noexcept {
    Stage3Slice slice;
    slice.per_rank = world == 0 ? 0 : (numel + world - 1) / world;
    slice.begin = std::min<std::uint64_t>(numel, std::uint64_t{rank} * slice.per_rank);
    slice.count = std::min(slice.per_rank, numel - slice.begin);
    return slice;
}

std::string_view stream_name(Stream stream) noexcept {
    switch (stream) {
        case Stream::kMaster:
            return "fp32";
        case Stream::kExpAvg:
            return "exp_avg";
        case Stream::kExpAvgSq:
            return "exp_avg_sq";
    }
    return "fp32";
}

ConsolidationPlan plan_consolidation(const checkpoint::CheckpointMeta& meta,
                                     const PlanOptions& options) {
    const std::size_t optim_files =
        meta.layout == checkpoint::MasterLayout::kWholeParams ? 1 : meta.world_size;
    if (meta.world_size == 0 || meta.optim.size() != optim_files) {
        throw_internal_error("checkpoint metadata is not assembled");
    }
    if (meta.layout == checkpoint::MasterLayout::kWholeParams &&
        options.stream != Stream::kMaster) {
        throw_unsupported(meta.files.tag_dir,
                          "is a universal checkpoint already: planning its Adam moments again "
                          "is not supported");
    }
    return Planner(meta, options).run();
}

}  // namespace z2f::plan
