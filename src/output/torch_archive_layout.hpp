// Lays out a torch.save zip archive record by record, before any tensor byte exists: records
// whose bytes are known (data.pkl, version, small storages) become fixed regions, the others
// slots that the execute phase fills. The zip bytes are those of container/zip_writer.hpp
// (STORED records whose data start on 64-byte boundaries, data descriptors, ZIP64 end records);
// the tail (crc_tail) follows from the slots' CRCs once they are known.
//
// Records land in the order they are added, under "<archive>/"; torch.save writes data.pkl
// first, then the storages in sorted key order, then `version` (and, from torch 2.1 on,
// `byteorder` after data.pkl: the caller decides whether to add it).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "output/output_layout.hpp"

namespace z2f::output {

class TorchArchiveLayout {
  public:
    // `file_name` is the file's path in the output directory, `archive` the folder of its
    // records (torch.save uses the file name's stem).
    TorchArchiveLayout(std::string file_name, std::string archive);

    void add_record(std::string_view name, std::span<const std::byte> bytes);
    // A record of `size` bytes filled from plan tensor `tensor` (a slot).
    void add_slot(std::string_view name, std::uint32_t tensor, std::uint64_t size);

    // The layout; the builder is spent afterwards.
    OutputFileLayout finish();

  private:
    void add(std::string_view name, std::uint64_t size, std::span<const std::byte> known,
             std::int64_t slot, std::uint32_t tensor);

    OutputFileLayout layout_;
    std::string archive_;
    std::uint64_t cursor_ = 0;
    std::uint64_t central_directory_size_ = 0;
    bool after_slot_ = false;
};

// Every byte of a layout that has no slots (fixed regions and tail), in file order.
std::vector<std::byte> layout_bytes(const OutputFileLayout& layout);

}  // namespace z2f::output
