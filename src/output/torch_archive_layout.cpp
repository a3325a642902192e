#include "output/torch_archive_layout.hpp"

#include <algorithm>
#include <utility>

#include "common/bytes.hpp"
#include "common/crc32.hpp"
#include "common/errors.hpp"
#include "container/zip_writer.hpp"
#include "output/torch_bin_layout.hpp"

namespace z2f::output {

namespace zip = container::zip;

TorchArchiveLayout::TorchArchiveLayout(std::string file_name, std::string archive)
    : archive_(std::move(archive)) {
    layout_.name = std::move(file_name);
    layout_.format = OutputFormat::kTorch;
}

void TorchArchiveLayout::add_record(std::string_view name, std::span<const std::byte> bytes) {
    add(name, bytes.size(), bytes, -1, 0);
}

void TorchArchiveLayout::add_slot(std::string_view name, std::uint32_t tensor, std::uint64_t size) {
    add(name, size, {}, static_cast<std::int64_t>(layout_.slots.size()), tensor);
}

void TorchArchiveLayout::add(std::string_view name, std::uint64_t size,
                             std::span<const std::byte> known, std::int64_t slot,
                             std::uint32_t tensor) {
    std::string full_name = archive_ + "/" + std::string(name);
    for (const ZipEntry& entry : layout_.zip_entries) {
        if (entry.name == full_name) {
            throw_internal_error("torch archive layout: record '" + full_name + "' added twice");
        }
    }
    zip::RecordPlacement placement = zip::place_record(cursor_, full_name, size);
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
    } else {
        layout_.slots.push_back({tensor, placement.data_offset(), size});
    }
    // Never merge a fixed region across a slot, so that no slot (even an empty one) falls
    // inside a fixed region.
    if (!after_slot_ && !layout_.fixed.empty() &&
        layout_.fixed.back().offset + layout_.fixed.back().bytes.size() ==
            placement.local_header_offset) {
        auto& previous = layout_.fixed.back().bytes;
        previous.insert(previous.end(), bytes.bytes().begin(), bytes.bytes().end());
    } else {
        layout_.fixed.push_back({placement.local_header_offset, bytes.take()});
    }
    after_slot_ = slot >= 0;
    entry.name = std::move(full_name);
    layout_.zip_entries.push_back(std::move(entry));
    central_directory_size_ += placement.central_header_size();
    cursor_ = placement.end_offset();
}

OutputFileLayout TorchArchiveLayout::finish() {
    layout_.size = cursor_ + central_directory_size_ + zip::kEndRecordsSize;
    return std::move(layout_);
}

std::vector<std::byte> layout_bytes(const OutputFileLayout& layout) {
    if (!layout.slots.empty()) {
        throw_internal_error("layout_bytes: '" + layout.name + "' has slots");
    }
    std::vector<std::byte> bytes(layout.size);
    auto place = [&](const FixedRegion& region) {
        if (region.offset + region.bytes.size() > bytes.size()) {
            throw_internal_error("layout_bytes: a region of '" + layout.name +
                                 "' lies past its end");
        }
        std::copy(region.bytes.begin(), region.bytes.end(),
                  bytes.begin() + static_cast<std::ptrdiff_t>(region.offset));
    };
    std::uint64_t total = 0;
    for (const FixedRegion& region : layout.fixed) {
        place(region);
        total += region.bytes.size();
    }
    for (const FixedRegion& region : crc_tail(layout, {})) {
        place(region);
        total += region.bytes.size();
    }
    if (total != layout.size) {
        throw_internal_error("layout_bytes: the regions of '" + layout.name +
                             "' do not cover it exactly");
    }
    return bytes;
}

}  // namespace z2f::output
