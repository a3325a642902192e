#include "support/materialize.hpp"

#include <cstdint>
#include <cstring>
#include <stdexcept>

#include "common/crc32.hpp"
#include "support/expected_state.hpp"

namespace z2f::testing {

std::vector<std::byte> read_source_bytes(const plan::TensorPlan& plan,
                                         const plan::PlannedTensor& tensor) {
    std::vector<std::byte> bytes;
    for (const SourceExtent& extent : plan::source_extents(tensor)) {
        auto part = read_range(plan.inputs.at(extent.file).path, extent.offset, extent.length);
        bytes.insert(bytes.end(), part.begin(), part.end());
    }
    if (bytes.size() != tensor.source_bytes()) {
        throw std::runtime_error(tensor.name + ": extents hold " + std::to_string(bytes.size()) +
                                 " bytes, expected " + std::to_string(tensor.source_bytes()));
    }
    return bytes;
}

std::vector<std::byte> materialize(const plan::TensorPlan& plan, std::size_t index) {
    const plan::PlannedTensor* tensor = &plan.tensors.at(index);
    if (tensor->is_alias()) {
        tensor = &plan.tensors.at(static_cast<std::size_t>(tensor->alias_of));
    }
    std::vector<std::byte> source = read_source_bytes(plan, *tensor);
    if (tensor->source_dtype == tensor->output_dtype) {
        return source;
    }
    if (tensor->output_dtype != DType::kF32) {
        throw std::runtime_error("materialize: only widening to fp32 is implemented");
    }
    if (tensor->source_dtype == DType::kBF16 || tensor->source_dtype == DType::kF16) {
        return widen_to_f32(tensor->source_dtype, source);
    }
    std::vector<std::byte> out(tensor->numel() * 4);
    for (std::size_t i = 0; i < tensor->numel(); ++i) {
        float value;
        if (tensor->source_dtype == DType::kI64) {
            std::int64_t v;
            std::memcpy(&v, &source[8 * i], 8);
            value = static_cast<float>(v);
        } else if (tensor->source_dtype == DType::kBool || tensor->source_dtype == DType::kU8) {
            value = static_cast<float>(std::to_integer<std::uint8_t>(source[i]));
        } else {
            throw std::runtime_error("materialize: unsupported source dtype");
        }
        std::memcpy(&out[4 * i], &value, 4);
    }
    return out;
}

std::vector<std::byte> realize_layout(const output::OutputFileLayout& layout,
                                      const plan::TensorPlan& plan) {
    std::vector<std::byte> bytes(layout.size);
    auto put = [&](std::uint64_t offset, const std::vector<std::byte>& data) {
        if (offset + data.size() > bytes.size())
            throw std::runtime_error(layout.name + ": a region runs past the file's end");
        std::memcpy(bytes.data() + offset, data.data(), data.size());
    };
    for (const output::FixedRegion& region : layout.fixed)
        put(region.offset, region.bytes);
    std::vector<std::uint32_t> crcs;
    for (const output::TensorSlot& slot : layout.slots) {
        std::vector<std::byte> data = materialize(plan, slot.tensor);
        if (data.size() != slot.length)
            throw std::runtime_error(layout.name + ": a slot's tensor has another size");
        put(slot.offset, data);
        crcs.push_back(crc32_of(data));
    }
    if (layout.has_crc_tail()) {
        for (const output::FixedRegion& region : output::crc_tail(layout, crcs))
            put(region.offset, region.bytes);
    }
    return bytes;
}

}  // namespace z2f::testing
