#include "output/safetensors_layout.hpp"

#include <algorithm>
#include <limits>
#include <vector>

#include "common/bytes.hpp"
#include "common/errors.hpp"
#include "output/json_escape.hpp"

namespace z2f::output {
namespace {

using MetadataEntry = std::pair<std::string_view, std::string_view>;

std::uint64_t checked_add(std::uint64_t a, std::uint64_t b) {
    if (b > std::numeric_limits<std::uint64_t>::max() - a) {
        throw_internal_error("safetensors layout: file size overflows 64 bits");
    }
    return a + b;
}

void append_metadata(std::string& json, std::span<const MetadataEntry> extra_metadata) {
    std::vector<MetadataEntry> extras(extra_metadata.begin(), extra_metadata.end());
    std::sort(extras.begin(), extras.end(),
              [](const MetadataEntry& a, const MetadataEntry& b) { return a.first < b.first; });
    for (std::size_t i = 0; i < extras.size(); ++i) {
        if (extras[i].first == "format" || (i > 0 && extras[i].first == extras[i - 1].first)) {
            throw_internal_error("safetensors layout: metadata key '" +
                                 printable_bytes(extras[i].first) + "' given twice");
        }
    }
    json += "\"__metadata__\":{\"format\":\"pt\"";
    for (const auto& [key, value] : extras) {
        json += ',';
        append_json_string_serde(json, key, "safetensors metadata key");
        json += ':';
        append_json_string_serde(json, value, "safetensors metadata value");
    }
    json += '}';
}

}  // namespace

OutputFileLayout safetensors_layout(const plan::TensorPlan& plan,
                                    std::span<const std::uint32_t> tensors, std::string file_name,
                                    std::span<const MetadataEntry> extra_metadata) {
    std::vector<std::uint32_t> order;
    order.reserve(tensors.size());
    for (std::uint32_t index : tensors) {
        if (index >= plan.tensors.size()) {
            throw_internal_error("safetensors layout: tensor index out of range");
        }
        if (!plan.tensors[index].is_alias()) {
            order.push_back(index);
        }
    }
    // The reference writer's order: Dtype enum descending, then name bytes ascending.
    std::sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
        const plan::PlannedTensor& left = plan.tensors[a];
        const plan::PlannedTensor& right = plan.tensors[b];
        const int lo = safetensors_order(left.output_dtype);
        const int ro = safetensors_order(right.output_dtype);
        if (lo != ro) {
            return lo > ro;
        }
        return left.name < right.name;
    });
    for (std::size_t i = 1; i < order.size(); ++i) {
        if (plan.tensors[order[i]].name == plan.tensors[order[i - 1]].name) {
            throw_internal_error("safetensors layout: tensor '" +
                                 printable_bytes(plan.tensors[order[i]].name) +
                                 "' appears twice in " + file_name);
        }
    }

    std::string json = "{";
    append_metadata(json, extra_metadata);
    std::vector<std::uint64_t> begins;
    begins.reserve(order.size());
    std::uint64_t data_size = 0;
    for (std::uint32_t index : order) {
        const plan::PlannedTensor& tensor = plan.tensors[index];
        const std::uint64_t begin = data_size;
        data_size = checked_add(data_size, tensor.output_bytes());
        begins.push_back(begin);
        json += ',';
        append_json_string_serde(json, tensor.name, "tensor name");
        json += ":{\"dtype\":\"";
        json += safetensors_name(tensor.output_dtype);
        json += "\",\"shape\":[";
        for (std::size_t d = 0; d < tensor.shape.size(); ++d) {
            if (d > 0) {
                json += ',';
            }
            json += std::to_string(tensor.shape[d]);
        }
        json += "],\"data_offsets\":[";
        json += std::to_string(begin);
        json += ',';
        json += std::to_string(data_size);
        json += "]}";
    }
    json += '}';
    json.append((8 - json.size() % 8) % 8, ' ');

    const std::uint64_t header_length = json.size();
    if (header_length > kSafetensorsMaxHeaderLength) {
        throw_usage_error(file_name + ": its safetensors header would take " +
                          std::to_string(header_length) +
                          " bytes, more than the 100,000,000 that safetensors readers accept "
                          "(too many tensors in one file); choose a smaller --max_shard_size");
    }
    const std::uint64_t data_start = 8 + header_length;

    OutputFileLayout layout;
    layout.name = std::move(file_name);
    layout.format = OutputFormat::kSafetensors;
    layout.size = checked_add(data_start, data_size);
    ByteWriter header;
    header.put<std::uint64_t>(header_length);
    header.put_text(json);
    layout.fixed.push_back(FixedRegion{0, header.take()});
    layout.slots.reserve(order.size());
    for (std::size_t i = 0; i < order.size(); ++i) {
        layout.slots.push_back(
            TensorSlot{order[i], data_start + begins[i], plan.tensors[order[i]].output_bytes()});
    }
    return layout;
}

}  // namespace z2f::output
