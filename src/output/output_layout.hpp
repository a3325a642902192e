// The byte layout of one output file, computed before a single byte is written.
//
// Every format we write (safetensors, torch zip `.bin`, HDF5) allows knowing the file offset of
// every tensor up front. A layout lists the bytes that do not depend on tensor data ("fixed
// regions": headers, zip local headers, HDF5 metadata) and the slot of every tensor. The
// execute phase writes the fixed regions, copies each tensor's source extents into its slot
// (converting the dtype on the way), and for the torch zip format appends the CRC-dependent
// tail (data descriptors, central directory, end records) once every slot's CRC-32 is known.
//
// Invariants (checked by the layout unit tests): slots and fixed regions never overlap each
// other, they lie inside [0, size), and together with the tail they cover every byte of the
// file, so an output file never contains bytes we did not write.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "zero2fp32/options.hpp"

namespace z2f::output {

struct FixedRegion {
    std::uint64_t offset = 0;
    std::vector<std::byte> bytes;
};

// Where one tensor's data goes. The length is the tensor's output_bytes().
struct TensorSlot {
    std::uint32_t tensor = 0;  // index into TensorPlan::tensors
    std::uint64_t offset = 0;
    std::uint64_t length = 0;
};

// One record of a torch zip archive, as the tail needs it. Records are listed in file order.
struct ZipEntry {
    std::string name;  // full name inside the archive, including the archive folder
    std::uint64_t local_header_offset = 0;
    std::uint64_t data_offset = 0;
    std::uint64_t size = 0;
    // CRC-32 of records whose bytes are known up front (data.pkl, byteorder, version, ...).
    std::optional<std::uint32_t> crc32;
    // For storage records: index into OutputFileLayout::slots whose CRC this record takes.
    std::int64_t slot = -1;
};

struct OutputFileLayout {
    std::string name;  // file name inside the output directory
    OutputFormat format = OutputFormat::kSafetensors;
    std::uint64_t size = 0;
    std::vector<FixedRegion> fixed;
    std::vector<TensorSlot> slots;  // ascending offsets
    // Zip archives (torch `.bin`): the records, so that the tail can be built from the slots'
    // CRCs once they are known. Empty when the file has no CRC-dependent bytes.
    std::vector<ZipEntry> zip_entries;

    bool has_crc_tail() const noexcept { return !zip_entries.empty(); }
};

// The bytes that depend on the slots' CRC-32s, in slot order: for zip archives the data
// descriptors, the central directory and the end records. Empty without a CRC tail.
std::vector<FixedRegion> crc_tail(const OutputFileLayout& layout,
                                  std::span<const std::uint32_t> slot_crcs);

// Where crc_tail's regions lie, without their bytes, in file order: a data descriptor needs
// its slot's CRC alone (`slot`), the central directory with the end records every CRC
// (`slot` -1). What a writer that streams a file in order needs: a descriptor's bytes are known
// as soon as its slot has been written, the directory at the end.
struct TailPlacement {
    std::uint64_t offset = 0;
    std::uint64_t length = 0;
    std::int64_t slot = -1;
};
std::vector<TailPlacement> crc_tail_placements(const OutputFileLayout& layout);
// The bytes of one of them; `slot_crcs` needs the CRCs it depends on (the others may be 0).
std::vector<std::byte> crc_tail_bytes(const OutputFileLayout& layout, const TailPlacement& place,
                                      std::span<const std::uint32_t> slot_crcs);

}  // namespace z2f::output
