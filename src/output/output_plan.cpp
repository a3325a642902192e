#include "output/output_plan.hpp"

#include <algorithm>

#include "common/errors.hpp"
#include "output/hdf5_module.hpp"
#include "output/index_json.hpp"
#include "output/safetensors_layout.hpp"
#include "output/shard_split.hpp"
#include "output/torch_bin_layout.hpp"

namespace z2f::output {

OutputPlan plan_outputs(const plan::TensorPlan& plan, const OutputPlanOptions& options) {
    OutputPlan out;
    out.format = options.format;
    const bool drop_aliases = options.format == OutputFormat::kSafetensors;

    // The shard split sees tensors in state-dict order; under safetensors aliases are not part
    // of any file, elsewhere they follow their owner's storage.
    std::vector<std::uint32_t> plan_index;
    std::vector<std::int64_t> input_of(plan.tensors.size(), -1);
    std::vector<ShardInput> inputs;
    for (std::uint32_t i = 0; i < plan.tensors.size(); ++i) {
        const plan::PlannedTensor& tensor = plan.tensors[i];
        if (tensor.is_alias()) {
            const std::string& owner = plan.tensors[static_cast<std::size_t>(tensor.alias_of)].name;
            if (drop_aliases) {
                out.tied_metadata.emplace_back(tensor.name, owner);
                continue;
            }
            std::int64_t owner_input = input_of[static_cast<std::size_t>(tensor.alias_of)];
            if (owner_input < 0) {
                throw_internal_error("alias '" + tensor.name + "' precedes its owner");
            }
            input_of[i] = static_cast<std::int64_t>(inputs.size());
            inputs.push_back({tensor.name, 0, owner_input});
        } else {
            input_of[i] = static_cast<std::int64_t>(inputs.size());
            inputs.push_back({tensor.name, tensor.output_bytes(), -1});
        }
        plan_index.push_back(i);
    }
    std::sort(out.tied_metadata.begin(), out.tied_metadata.end());

    ShardSplit split = split_into_shards(inputs, options.max_shard_size, options.format);
    out.total_size = split.total_size;
    std::vector<std::pair<std::string_view, std::string_view>> weight_map;
    for (const ShardFile& shard : split.files) {
        OutputFile file;
        file.name = shard.name;
        file.data_bytes = shard.bytes;
        for (std::uint32_t input : shard.tensors) {
            file.tensors.push_back(plan_index[input]);
        }
        out.files.push_back(std::move(file));
    }
    if (split.is_sharded()) {
        for (const OutputFile& file : out.files) {
            for (std::uint32_t tensor : file.tensors) {
                weight_map.emplace_back(plan.tensors[tensor].name, file.name);
            }
        }
        out.index_name = std::string(index_file_name(options.format));
        out.index_json = index_json(out.total_size, {}, weight_map);
    }
    return out;
}

OutputFileLayout layout_output_file(const plan::TensorPlan& plan, const OutputPlan& outputs,
                                    std::uint32_t file, const LayoutOptions& options) {
    const OutputFile& output = outputs.files.at(file);
    switch (outputs.format) {
        case OutputFormat::kSafetensors: {
            std::vector<std::pair<std::string_view, std::string_view>> metadata;
            for (const auto& [alias, owner] : outputs.tied_metadata) {
                metadata.emplace_back(alias, owner);
            }
            return safetensors_layout(plan, output.tensors, output.name, metadata);
        }
        case OutputFormat::kTorch:
            return layout_torch_bin_file(output.name, plan, output.tensors);
        case OutputFormat::kHdf5: {
            Hdf5LayoutOptions hdf5;
            hdf5.bf16_as_float = options.hdf5_bf16_as_float;
            hdf5.writer_version = options.writer_version;
            hdf5.source_checkpoint = options.source_checkpoint;
            return hdf5_layout_function()(output.name, plan, output.tensors, hdf5);
        }
        case OutputFormat::kUniversal:
            break;  // laid out by universal_layout, file by file
    }
    throw_internal_error("unknown output format");
}

}  // namespace z2f::output
