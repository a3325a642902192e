#include "container/zip_writer.hpp"

#include <algorithm>

#include "common/crc32.hpp"
#include "common/errors.hpp"

namespace z2f::container::zip {
namespace {

// The record chunk add_record_from() asks for at a time: bounded memory for any record size.
constexpr std::uint64_t kCopyChunk = std::uint64_t{4} << 20;

std::uint32_t clamp32(std::uint64_t value) {
    return static_cast<std::uint32_t>(std::min(value, kZip64Limit));
}

std::uint16_t u16(std::uint64_t value) {
    return static_cast<std::uint16_t>(value);
}

void write_zip64_field(ByteWriter& out, const RecordPlacement& record,
                       std::uint64_t compressed_size) {
    std::uint64_t payload = (record.zip64_size() ? 16u : 0u) + (record.zip64_offset() ? 8u : 0u);
    out.put(kZip64FieldId);
    out.put(u16(payload));
    if (record.zip64_size()) {
        out.put(record.size);
        out.put(compressed_size);
    }
    if (record.zip64_offset()) {
        out.put(record.local_header_offset);
    }
}

}  // namespace

std::uint64_t torch_padding(std::uint64_t local_header_offset, std::uint64_t name_size,
                            std::uint64_t data_size) noexcept {
    std::uint64_t start = local_header_offset + kLocalHeaderSize + name_size + 4;
    bool large_size = data_size >= kZip64Limit;
    bool large_offset = local_header_offset >= kZip64Limit;
    if (large_size || large_offset) {
        start += 4;
        if (large_size) {
            start += 16;
        }
        if (large_offset) {
            start += 8;
        }
    }
    return (kTorchAlignment - start % kTorchAlignment) % kTorchAlignment;
}

std::uint64_t RecordPlacement::local_zip64_size() const noexcept {
    if (!needs_zip64()) {
        return 0;
    }
    return 4u + (zip64_size() ? 16u : 0u) + (zip64_offset() ? 8u : 0u);
}

std::uint64_t RecordPlacement::central_zip64_size() const noexcept {
    // Same fields as the local one: (usize, csize) for a large size, the offset for a large one.
    return local_zip64_size();
}

RecordPlacement place_record(std::uint64_t local_header_offset, std::string_view full_name,
                             std::uint64_t size) {
    if (full_name.empty() || full_name.size() > 0xFFFF) {
        throw_internal_error("zip: record name of " + std::to_string(full_name.size()) +
                             " bytes (1 to 65535 allowed)");
    }
    RecordPlacement record;
    record.local_header_offset = local_header_offset;
    record.name_size = full_name.size();
    record.size = size;
    record.padding = torch_padding(local_header_offset, full_name.size(), size);
    return record;
}

void write_local_header(ByteWriter& out, std::string_view full_name,
                        const RecordPlacement& record) {
    out.put(kLocalHeaderSignature);
    out.put(std::uint16_t{0});  // version needed: miniz writes 0 for stored records
    out.put(record.flags());
    out.put(std::uint16_t{0});  // method: stored
    out.put(std::uint16_t{0});  // time
    out.put(std::uint16_t{0});  // date
    out.put(std::uint32_t{0});  // crc: in the data descriptor (or 0 for an empty record)
    out.put(std::uint32_t{0});  // compressed size
    out.put(std::uint32_t{0});  // uncompressed size
    out.put(u16(full_name.size()));
    out.put(u16(record.local_extra_size()));
    out.put_text(full_name);
    if (record.needs_zip64()) {
        write_zip64_field(out, record, 0);  // miniz: compressed size unknown yet, written as 0
    }
    out.put(kPaddingFieldId);
    out.put(u16(record.padding));
    out.put_repeated(std::byte{'Z'}, record.padding);
}

void write_data_descriptor(ByteWriter& out, const RecordPlacement& record, std::uint32_t crc) {
    if (!record.has_descriptor()) {
        return;
    }
    out.put(kDescriptorSignature);
    out.put(crc);
    if (record.needs_zip64()) {
        out.put(record.size);  // compressed
        out.put(record.size);  // uncompressed
    } else {
        out.put(static_cast<std::uint32_t>(record.size));
        out.put(static_cast<std::uint32_t>(record.size));
    }
}

void write_central_header(ByteWriter& out, std::string_view full_name,
                          const RecordPlacement& record, std::uint32_t crc) {
    out.put(kCentralHeaderSignature);
    out.put(std::uint16_t{0});  // version made by
    out.put(std::uint16_t{0});  // version needed
    out.put(record.flags());
    out.put(std::uint16_t{0});  // method
    out.put(std::uint16_t{0});  // time
    out.put(std::uint16_t{0});  // date
    out.put(record.has_descriptor() ? crc : std::uint32_t{0});
    out.put(clamp32(record.size));  // compressed
    out.put(clamp32(record.size));  // uncompressed
    out.put(u16(full_name.size()));
    out.put(u16(record.central_zip64_size()));
    out.put(std::uint16_t{0});  // comment length
    out.put(std::uint16_t{0});  // disk number
    out.put(std::uint16_t{0});  // internal attributes
    out.put(std::uint32_t{0});  // external attributes
    out.put(clamp32(record.local_header_offset));
    out.put_text(full_name);
    if (record.needs_zip64()) {
        write_zip64_field(out, record, record.size);
    }
}

void write_end_records(ByteWriter& out, std::uint64_t entries, std::uint64_t cd_offset,
                       std::uint64_t cd_size) {
    std::uint64_t zip64_end_offset = cd_offset + cd_size;
    out.put(kZip64EndSignature);
    out.put(std::uint64_t{kZip64EndRecordSize - 12});  // size of the rest of the record
    out.put(kZip64MadeBy);
    out.put(kZip64Needed);
    out.put(std::uint32_t{0});  // this disk
    out.put(std::uint32_t{0});  // disk with the central directory
    out.put(entries);
    out.put(entries);
    out.put(cd_size);
    out.put(cd_offset);

    out.put(kZip64LocatorSignature);
    out.put(std::uint32_t{0});  // disk with the ZIP64 end record
    out.put(zip64_end_offset);
    out.put(std::uint32_t{1});  // number of disks

    out.put(kEndSignature);
    out.put(std::uint16_t{0});
    out.put(std::uint16_t{0});
    out.put(u16(std::min<std::uint64_t>(entries, 0xFFFF)));
    out.put(u16(std::min<std::uint64_t>(entries, 0xFFFF)));
    out.put(clamp32(cd_size));
    out.put(clamp32(cd_offset));
    out.put(std::uint16_t{0});  // comment length
}

std::string torch_archive_name(std::string_view file_name) {
    std::size_t slash = file_name.find_last_of("/\\");
    std::string_view base =
        slash == std::string_view::npos ? file_name : file_name.substr(slash + 1);
    std::size_t dot = base.find_last_of('.');
    if (dot != std::string_view::npos) {
        base = base.substr(0, dot);
    }
    return base.empty() ? std::string("archive") : std::string(base);
}

// ----------------------------------------------------------------------------------------------
// TorchZipWriter

TorchZipWriter::TorchZipWriter(const std::string& path)
    : TorchZipWriter(path, torch_archive_name(path)) {}

TorchZipWriter::TorchZipWriter(const std::string& path, std::string archive_name)
    : file_(io::File::create_truncate(path)), archive_name_(std::move(archive_name)) {}

RecordPlacement TorchZipWriter::begin_record(std::string_view name, std::uint64_t size) {
    if (finished_) {
        throw_internal_error("zip: record '" + std::string(name) + "' added after finish()");
    }
    std::string full_name = archive_name_ + "/" + std::string(name);
    if (!names_.insert(full_name).second) {
        throw_internal_error("zip: record '" + full_name + "' written twice");
    }
    RecordPlacement placement = place_record(cursor_, full_name, size);
    ByteWriter header;
    write_local_header(header, full_name, placement);
    file_.write_all(cursor_, header.bytes());
    records_.push_back({std::move(full_name), placement, 0});
    if (name == "version") {
        wrote_version_ = true;
    }
    return placement;
}

void TorchZipWriter::end_record(RecordPlacement placement, std::uint32_t crc) {
    ByteWriter descriptor;
    write_data_descriptor(descriptor, placement, crc);
    file_.write_all(placement.descriptor_offset(), descriptor.bytes());
    records_.back().crc = crc;
    cursor_ = placement.end_offset();
}

void TorchZipWriter::add_record(std::string_view name, std::span<const std::byte> data) {
    RecordPlacement placement = begin_record(name, data.size());
    file_.write_all(placement.data_offset(), data);
    end_record(placement, crc32_of(data));
}

void TorchZipWriter::add_record_from(std::string_view name, std::uint64_t size,
                                     const ChunkProducer& produce) {
    RecordPlacement placement = begin_record(name, size);
    std::vector<std::byte> buffer(static_cast<std::size_t>(std::min(size, kCopyChunk)));
    std::uint32_t crc = 0;
    for (std::uint64_t done = 0; done < size;) {
        auto piece = static_cast<std::size_t>(std::min<std::uint64_t>(size - done, buffer.size()));
        std::span<std::byte> chunk(buffer.data(), piece);
        produce(done, chunk);
        crc = crc32_update(crc, chunk);
        file_.write_all(placement.data_offset() + done, chunk);
        done += piece;
    }
    end_record(placement, crc);
}

void TorchZipWriter::add_zero_record(std::string_view name, std::uint64_t size) {
    // Nothing is written between the header and the descriptor: writing the descriptor past
    // the gap extends the file and leaves the gap unallocated.
    RecordPlacement placement = begin_record(name, size);
    end_record(placement, crc32_of_zeros(size));
}

void TorchZipWriter::finish() {
    if (finished_) {
        return;
    }
    if (!wrote_version_) {
        add_record("version", as_byte_span("3\n"));
    }
    ByteWriter tail;
    for (const Written& written : records_) {
        write_central_header(tail, written.full_name, written.placement, written.crc);
    }
    std::uint64_t cd_size = tail.size();
    write_end_records(tail, records_.size(), cursor_, cd_size);
    file_.write_all(cursor_, tail.bytes());
    cursor_ += tail.size();
    finished_ = true;
    file_.close();
}

}  // namespace z2f::container::zip
