#include "output/torch_bin_layout.hpp"

#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "common/bytes.hpp"
#include "common/crc32.hpp"
#include "common/errors.hpp"
#include "container/zip_writer.hpp"
#include "pickle/pickle_writer.hpp"

namespace z2f::output {

namespace zip = container::zip;
namespace {

constexpr std::string_view kByteOrder = "little";
constexpr std::string_view kVersion = "3\n";

// One data/<k> record: the tensor whose bytes fill it.
struct StorageRecord {
    std::uint32_t tensor = 0;
    std::uint64_t bytes = 0;
};

// Follows alias_of to the tensor that owns the bytes.
std::uint32_t owner_of(const plan::TensorPlan& plan, std::uint32_t index) {
    std::uint32_t current = index;
    for (std::size_t hops = 0; plan.tensors[current].is_alias(); ++hops) {
        auto next = plan.tensors[current].alias_of;
        if (static_cast<std::uint64_t>(next) >= plan.tensors.size() || hops > plan.tensors.size()) {
            throw_internal_error("torch .bin layout: alias chain of '" + plan.tensors[index].name +
                                 "' is broken or cyclic");
        }
        current = static_cast<std::uint32_t>(next);
    }
    return current;
}

// Appends `bytes` at `offset`, growing the previous region when they touch and `merge` allows:
// fewer, larger writes for the execute phase.
void add_fixed(std::vector<FixedRegion>& fixed, std::uint64_t offset,
               std::span<const std::byte> bytes, bool merge) {
    if (merge && !fixed.empty() && fixed.back().offset + fixed.back().bytes.size() == offset) {
        fixed.back().bytes.insert(fixed.back().bytes.end(), bytes.begin(), bytes.end());
        return;
    }
    fixed.push_back({offset, std::vector<std::byte>(bytes.begin(), bytes.end())});
}

}  // namespace

OutputFileLayout layout_torch_bin_file(std::string file_name, const plan::TensorPlan& plan,
                                       std::span<const std::uint32_t> tensor_indices) {
    const std::string archive = zip::torch_archive_name(file_name);

    // Storages in order of first reference, and each tensor's storage.
    std::vector<StorageRecord> storages;
    std::unordered_map<std::uint32_t, std::uint32_t> storage_of_owner;
    std::unordered_set<std::uint32_t> seen;
    std::vector<pickle::TensorToWrite> refs;
    refs.reserve(tensor_indices.size());
    for (std::uint32_t index : tensor_indices) {
        if (index >= plan.tensors.size()) {
            throw_internal_error("torch .bin layout: tensor index " + std::to_string(index) +
                                 " out of range");
        }
        const plan::PlannedTensor& tensor = plan.tensors[index];
        if (!seen.insert(index).second) {
            throw_internal_error("torch .bin layout: tensor '" + tensor.name +
                                 "' listed twice in " + file_name);
        }
        std::uint32_t owner = owner_of(plan, index);
        const plan::PlannedTensor& owner_tensor = plan.tensors[owner];
        if (owner_tensor.output_dtype != tensor.output_dtype ||
            owner_tensor.numel() != tensor.numel()) {
            throw_internal_error("torch .bin layout: alias '" + tensor.name +
                                 "' differs in dtype or size from its owner '" + owner_tensor.name +
                                 "'");
        }
        if (torch_storage_name(tensor.output_dtype).empty()) {
            throw_unsupported(file_name, "tensor '" + tensor.name + "' has dtype " +
                                             std::string(dtype_display_name(tensor.output_dtype)) +
                                             ", which torch .bin files cannot hold as a typed "
                                             "storage; choose safetensors output");
        }
        // Keyed by owner: a tensor and all its aliases in this file share one storage. An alias
        // whose owner lives elsewhere becomes the first member of its own storage.
        auto [it, inserted] =
            storage_of_owner.try_emplace(owner, static_cast<std::uint32_t>(storages.size()));
        if (inserted) {
            storages.push_back({owner, owner_tensor.output_bytes()});
        }
        pickle::TensorToWrite ref;
        ref.storage.dtype = tensor.output_dtype;
        ref.storage.key = std::to_string(it->second);
        ref.storage.numel = owner_tensor.numel();
        ref.shape = tensor.shape;
        refs.push_back(std::move(ref));
    }

    // data.pkl: a plain dict, as torch.save(dict) pickles it.
    pickle::PickleWriter writer;
    writer.empty_dict();
    pickle::write_setitems(writer, refs.size(), [&](std::size_t i) {
        writer.unicode(plan.tensors[tensor_indices[i]].name);
        pickle::write_tensor_v2(writer, refs[i]);
    });
    const std::vector<std::byte> data_pkl = writer.finish();

    OutputFileLayout layout;
    layout.name = std::move(file_name);
    layout.format = OutputFormat::kTorch;

    std::uint64_t cursor = 0;
    std::uint64_t cd_size = 0;
    // An empty storage's zero-length slot sits where the next local header starts; never merge
    // across a slot, so that no slot, even an empty one, falls inside a fixed region.
    bool after_slot = false;
    auto add_record = [&](const std::string& name, std::uint64_t size,
                          std::span<const std::byte> known, std::int64_t slot) {
        std::string full_name = archive + "/" + name;
        zip::RecordPlacement placement = zip::place_record(cursor, full_name, size);
        ByteWriter bytes;
        zip::write_local_header(bytes, full_name, placement);
        ZipEntry entry;
        entry.local_header_offset = placement.local_header_offset;
        entry.data_offset = placement.data_offset();
        entry.size = size;
        entry.slot = slot;
        if (slot < 0) {
            std::uint32_t crc = crc32_of(known);
            bytes.put_bytes(known);
            zip::write_data_descriptor(bytes, placement, crc);
            entry.crc32 = crc;
        }
        add_fixed(layout.fixed, placement.local_header_offset, bytes.bytes(), !after_slot);
        after_slot = slot >= 0;
        entry.name = std::move(full_name);
        layout.zip_entries.push_back(std::move(entry));
        cd_size += placement.central_header_size();
        cursor = placement.end_offset();
    };

    add_record("data.pkl", data_pkl.size(), data_pkl, -1);
    add_record("byteorder", kByteOrder.size(), as_byte_span(kByteOrder), -1);
    layout.slots.reserve(storages.size());
    for (std::size_t k = 0; k < storages.size(); ++k) {
        auto slot = static_cast<std::int64_t>(layout.slots.size());
        add_record("data/" + std::to_string(k), storages[k].bytes, {}, slot);
        layout.slots.push_back(
            {storages[k].tensor, layout.zip_entries.back().data_offset, storages[k].bytes});
    }
    add_record("version", kVersion.size(), as_byte_span(kVersion), -1);

    layout.size = cursor + cd_size + zip::kEndRecordsSize;
    return layout;
}

std::vector<FixedRegion> crc_tail(const OutputFileLayout& layout,
                                  std::span<const std::uint32_t> slot_crcs) {
    if (!layout.has_crc_tail()) {
        return {};
    }
    if (slot_crcs.size() != layout.slots.size()) {
        throw_internal_error("crc_tail: " + std::to_string(slot_crcs.size()) + " CRCs for " +
                             std::to_string(layout.slots.size()) + " slots");
    }
    std::vector<FixedRegion> tail;
    ByteWriter directory;
    std::uint64_t cd_offset = 0;
    for (const ZipEntry& entry : layout.zip_entries) {
        zip::RecordPlacement placement =
            zip::place_record(entry.local_header_offset, entry.name, entry.size);
        if (placement.data_offset() != entry.data_offset) {
            throw_internal_error("crc_tail: entry '" + entry.name + "' was moved");
        }
        std::uint32_t crc = 0;
        if (entry.crc32) {
            crc = *entry.crc32;
        } else if (entry.slot >= 0 && static_cast<std::size_t>(entry.slot) < slot_crcs.size()) {
            crc = slot_crcs[static_cast<std::size_t>(entry.slot)];
            if (placement.has_descriptor()) {
                ByteWriter descriptor;
                zip::write_data_descriptor(descriptor, placement, crc);
                tail.push_back({placement.descriptor_offset(), descriptor.take()});
            }
        } else {
            throw_internal_error("crc_tail: entry '" + entry.name + "' has no CRC source");
        }
        zip::write_central_header(directory, entry.name, placement, crc);
        cd_offset = placement.end_offset();
    }
    std::uint64_t cd_size = directory.size();
    zip::write_end_records(directory, layout.zip_entries.size(), cd_offset, cd_size);
    if (cd_offset + directory.size() != layout.size) {
        throw_internal_error("crc_tail: tail of '" + layout.name +
                             "' does not end at the layout size");
    }
    tail.push_back({cd_offset, directory.take()});
    return tail;
}

std::vector<TailPlacement> crc_tail_placements(const OutputFileLayout& layout) {
    std::vector<TailPlacement> placements;
    if (!layout.has_crc_tail())
        return placements;
    std::uint64_t cd_offset = 0;
    for (const ZipEntry& entry : layout.zip_entries) {
        zip::RecordPlacement placement =
            zip::place_record(entry.local_header_offset, entry.name, entry.size);
        if (!entry.crc32 && entry.slot >= 0 && placement.has_descriptor())
            placements.push_back(
                {placement.descriptor_offset(), placement.descriptor_size(), entry.slot});
        cd_offset = placement.end_offset();
    }
    placements.push_back({cd_offset, layout.size - cd_offset, -1});
    return placements;
}

std::vector<std::byte> crc_tail_bytes(const OutputFileLayout& layout, const TailPlacement& place,
                                      std::span<const std::uint32_t> slot_crcs) {
    if (place.slot < 0) {
        std::vector<FixedRegion> tail = crc_tail(layout, slot_crcs);
        if (tail.empty() || tail.back().offset != place.offset)
            throw_internal_error("crc_tail_bytes: no directory at " + std::to_string(place.offset));
        return std::move(tail.back().bytes);
    }
    for (const ZipEntry& entry : layout.zip_entries) {
        if (entry.slot != place.slot)
            continue;
        zip::RecordPlacement placement =
            zip::place_record(entry.local_header_offset, entry.name, entry.size);
        ByteWriter descriptor;
        zip::write_data_descriptor(descriptor, placement,
                                   slot_crcs[static_cast<std::size_t>(place.slot)]);
        return descriptor.take();
    }
    throw_internal_error("crc_tail_bytes: no zip entry for slot " + std::to_string(place.slot));
}

}  // namespace z2f::output
