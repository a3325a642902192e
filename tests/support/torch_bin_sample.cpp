#include "support/torch_bin_sample.hpp"

#include <bit>
#include <cstring>
#include <stdexcept>

#include "common/bytes.hpp"
#include "common/crc32.hpp"
#include "io/posix_file.hpp"
#include "output/torch_bin_layout.hpp"

namespace z2f::test {
namespace {

std::vector<std::byte> checked_fill(const SlotFiller& fill, const output::TensorSlot& slot) {
    std::vector<std::byte> bytes = fill(slot);
    if (bytes.size() != slot.length) {
        throw std::runtime_error("slot filler returned the wrong number of bytes");
    }
    return bytes;
}

void place(std::vector<std::byte>& file, std::uint64_t offset, std::span<const std::byte> bytes) {
    if (offset + bytes.size() > file.size()) {
        throw std::runtime_error("region past the end of the layout");
    }
    if (!bytes.empty()) {  // an empty slot's data() may be null
        std::memcpy(file.data() + offset, bytes.data(), bytes.size());
    }
}

plan::PlannedTensor tensor(std::string name, std::vector<std::uint64_t> shape, DType dtype) {
    plan::PlannedTensor t;
    t.name = std::move(name);
    t.shape = std::move(shape);
    t.source_dtype = dtype;
    t.output_dtype = dtype;
    return t;
}

}  // namespace

std::vector<std::uint32_t> realize_torch_layout(const output::OutputFileLayout& layout,
                                                const std::string& path, const SlotFiller& fill) {
    io::File file = io::File::create_truncate(path);
    file.truncate(layout.size);
    for (const output::FixedRegion& region : layout.fixed) {
        file.write_all(region.offset, region.bytes);
    }
    std::vector<std::uint32_t> crcs;
    for (const output::TensorSlot& slot : layout.slots) {
        std::vector<std::byte> bytes = checked_fill(fill, slot);
        file.write_all(slot.offset, bytes);
        crcs.push_back(crc32_of(bytes));
    }
    for (const output::FixedRegion& region : output::crc_tail(layout, crcs)) {
        file.write_all(region.offset, region.bytes);
    }
    file.close();
    return crcs;
}

std::vector<std::byte> realize_torch_layout_in_memory(const output::OutputFileLayout& layout,
                                                      const SlotFiller& fill) {
    // Poisoned so that a byte no region covers shows up in the zip checks.
    std::vector<std::byte> file(layout.size, std::byte{0xEE});
    for (const output::FixedRegion& region : layout.fixed) {
        place(file, region.offset, region.bytes);
    }
    std::vector<std::uint32_t> crcs;
    for (const output::TensorSlot& slot : layout.slots) {
        std::vector<std::byte> bytes = checked_fill(fill, slot);
        place(file, slot.offset, bytes);
        crcs.push_back(crc32_of(bytes));
    }
    for (const output::FixedRegion& region : output::crc_tail(layout, crcs)) {
        place(file, region.offset, region.bytes);
    }
    return file;
}

std::vector<std::byte> sample_values(DType dtype, std::uint64_t numel, std::uint32_t index) {
    ByteWriter out;
    for (std::uint64_t j = 0; j < numel; ++j) {
        double real = (index + 1) * 0.5 + static_cast<double>(j) * 0.25;
        auto integer = static_cast<std::int64_t>(index) * 1000 + 7 * static_cast<std::int64_t>(j);
        switch (dtype) {
            case DType::kF64:
                out.put(std::bit_cast<std::uint64_t>(real));
                break;
            case DType::kF32:
                out.put(std::bit_cast<std::uint32_t>(static_cast<float>(real)));
                break;
            case DType::kBF16:
                // Exact values: truncating the fp32 bits is the bf16 value.
                out.put(static_cast<std::uint16_t>(
                    std::bit_cast<std::uint32_t>(static_cast<float>(real)) >> 16));
                break;
            case DType::kF16: {
                // Exact small values: build the half from the float's exponent and mantissa.
                std::uint32_t bits = std::bit_cast<std::uint32_t>(static_cast<float>(real));
                std::uint32_t sign = (bits >> 16) & 0x8000u;
                auto exponent = static_cast<std::int32_t>((bits >> 23) & 0xFFu) - 127 + 15;
                std::uint32_t mantissa = (bits >> 13) & 0x3FFu;
                out.put(static_cast<std::uint16_t>(
                    sign | (static_cast<std::uint32_t>(exponent) << 10) | mantissa));
                break;
            }
            case DType::kI64:
                out.put(static_cast<std::uint64_t>(integer + (std::int64_t{1} << 40)));
                break;
            case DType::kI32:
                out.put(static_cast<std::uint32_t>(integer));
                break;
            case DType::kBool:
                out.put_u8(static_cast<std::uint8_t>((index + j) % 2));
                break;
            default:
                throw std::runtime_error("sample_values: dtype not in the sample");
        }
    }
    return out.take();
}

plan::TensorPlan sample_plan() {
    plan::TensorPlan plan;
    plan.tensors.push_back(tensor("a.weight", {3, 5}, DType::kF32));
    plan.tensors.push_back(tensor("a.bias", {5}, DType::kF32));
    plan.tensors.push_back(tensor("b.scale", {2, 2}, DType::kBF16));
    plan.tensors.push_back(tensor("b.half", {3}, DType::kF16));
    plan.tensors.push_back(tensor("step", {}, DType::kF32));
    plan.tensors.push_back(tensor("empty", {0, 3}, DType::kF32));
    plan.tensors.push_back(tensor("position_ids", {1, 6}, DType::kI64));
    plan.tensors.push_back(tensor("mask", {4}, DType::kBool));
    plan.tensors.push_back(tensor("c.double", {2}, DType::kF64));
    plan.tensors.push_back(tensor("also_empty", {2, 0}, DType::kBF16));
    plan::PlannedTensor tied = tensor("tied.weight", {3, 5}, DType::kF32);
    tied.role = TensorRole::kAlias;
    tied.alias_of = 0;
    plan.tensors.push_back(tied);
    return plan;
}

std::vector<std::byte> sample_slot_bytes(const plan::TensorPlan& plan,
                                         const output::TensorSlot& slot) {
    const plan::PlannedTensor& t = plan.tensors[slot.tensor];
    return sample_values(t.output_dtype, t.numel(), slot.tensor);
}

}  // namespace z2f::test
