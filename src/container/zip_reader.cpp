#include "container/zip_reader.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <string>

#include <zlib.h>

#include "common/bytes.hpp"
#include "common/errors.hpp"
#include "container/zip_format.hpp"

namespace z2f::container {
namespace {

using namespace zip;  // the format's constants (zip_format.hpp)
// Upper bound on a central directory we agree to load: 64 MiB is ~1.4 million entries.
constexpr std::uint64_t kMaxCentralDirectory = std::uint64_t{64} << 20;

std::string hex32(std::uint32_t value) {
    static constexpr char kDigits[] = "0123456789abcdef";
    std::string text = "0x";
    for (int shift = 28; shift >= 0; shift -= 4) {
        text += kDigits[(value >> shift) & 0xF];
    }
    return text;
}

std::vector<std::byte> read_bytes(const io::File& file, std::uint64_t offset, std::uint64_t size) {
    std::vector<std::byte> bytes(static_cast<std::size_t>(size));
    file.read_exact(offset, bytes);
    return bytes;
}

struct EndOfDirectory {
    std::uint64_t entries = 0;
    std::uint64_t cd_size = 0;
    std::uint64_t cd_offset = 0;
    std::uint64_t directory_end = 0;  // first byte after the central directory's allowed range
};

// Finds the end record in the file's tail and, when present, follows the ZIP64 locator.
EndOfDirectory read_end_of_directory(const io::File& file, std::uint64_t file_size) {
    const std::string& path = file.path();
    // The last end record whose comment fits, searched backwards from the end. First in the
    // last bytes alone (an archive without a comment, as torch writes it, with its ZIP64
    // locator before the record): the full window of the longest comment re-reads 64 KiB of
    // data the conversion reads anyway. The small window is a suffix of the full one and the
    // search runs backwards, so both find the same record.
    std::uint64_t tail_size = 0;
    std::uint64_t tail_start = 0;
    std::vector<std::byte> tail;
    std::optional<std::size_t> found;
    for (std::uint64_t window :
         {kEndRecordSize + kZip64LocatorSize, kEndRecordSize + kMaxCommentSize}) {
        if (tail_size == std::min<std::uint64_t>(file_size, window))
            break;  // the file is no longer than the first window
        tail_size = std::min<std::uint64_t>(file_size, window);
        tail_start = file_size - tail_size;
        tail = read_bytes(file, tail_start, tail_size);
        const std::size_t last =
            tail.size() >= kEndRecordSize ? tail.size() - kEndRecordSize + 1 : 0;
        for (std::size_t pos = last; pos-- > 0;) {
            if (load_le<std::uint32_t>(&tail[pos]) != kEndSignature) {
                continue;
            }
            std::size_t comment = load_le<std::uint16_t>(&tail[pos + 20]);
            if (pos + kEndRecordSize + comment <= tail.size()) {
                found = pos;
                break;
            }
        }
        if (found)
            break;
    }
    if (!found) {
        throw_input_error(path,
                          "no zip end-of-central-directory record: the file is truncated or is "
                          "not a zip archive");
    }
    const std::byte* end = &tail[*found];
    std::uint64_t end_offset = tail_start + *found;
    std::uint16_t disk = load_le<std::uint16_t>(end + 4);
    std::uint16_t cd_disk = load_le<std::uint16_t>(end + 6);
    EndOfDirectory result;
    result.entries = load_le<std::uint16_t>(end + 10);
    result.cd_size = load_le<std::uint32_t>(end + 12);
    result.cd_offset = load_le<std::uint32_t>(end + 16);
    result.directory_end = end_offset;

    // torch always writes ZIP64 end records; other writers only when a field saturates.
    bool has_locator =
        end_offset >= kZip64LocatorSize && *found >= kZip64LocatorSize &&
        load_le<std::uint32_t>(&tail[*found - kZip64LocatorSize]) == kZip64LocatorSignature;
    if (has_locator) {
        const std::byte* locator = &tail[*found - kZip64LocatorSize];
        std::uint64_t zip64_end_offset = load_le<std::uint64_t>(locator + 8);
        std::uint32_t disks = load_le<std::uint32_t>(locator + 16);
        if (disks > 1) {
            throw_unsupported(path, "multi-volume zip archives are not supported");
        }
        std::uint64_t locator_offset = end_offset - kZip64LocatorSize;
        if (zip64_end_offset > locator_offset ||
            locator_offset - zip64_end_offset < kZip64EndRecordSize) {
            throw_input_error(path, "ZIP64 locator points to offset " +
                                        std::to_string(zip64_end_offset) +
                                        ", outside the file's directory area");
        }
        std::vector<std::byte> record = read_bytes(file, zip64_end_offset, kZip64EndRecordSize);
        if (load_le<std::uint32_t>(record.data()) != kZip64EndSignature) {
            throw_input_error(path, "no ZIP64 end-of-central-directory record at offset " +
                                        std::to_string(zip64_end_offset));
        }
        disk = 0;
        cd_disk = static_cast<std::uint16_t>(load_le<std::uint32_t>(record.data() + 20) != 0);
        result.entries = load_le<std::uint64_t>(record.data() + 32);
        result.cd_size = load_le<std::uint64_t>(record.data() + 40);
        result.cd_offset = load_le<std::uint64_t>(record.data() + 48);
        result.directory_end = zip64_end_offset;
    } else if (result.entries == 0xFFFF || result.cd_size == 0xFFFFFFFF ||
               result.cd_offset == 0xFFFFFFFF) {
        throw_input_error(path,
                          "zip end record needs ZIP64 values but no ZIP64 locator precedes it");
    }
    if (disk != 0 || cd_disk != 0) {
        throw_unsupported(path, "multi-volume zip archives are not supported");
    }
    if (result.cd_offset > result.directory_end ||
        result.cd_size > result.directory_end - result.cd_offset) {
        throw_input_error(path, "central directory (offset " + std::to_string(result.cd_offset) +
                                    ", " + std::to_string(result.cd_size) +
                                    " bytes) does not fit before its end record at offset " +
                                    std::to_string(result.directory_end));
    }
    if (result.cd_size > kMaxCentralDirectory) {
        throw_input_error(path, "central directory of " + std::to_string(result.cd_size) +
                                    " bytes exceeds the limit of " +
                                    std::to_string(kMaxCentralDirectory));
    }
    if (result.entries > result.cd_size / kCentralHeaderSize) {
        throw_input_error(path, "zip end record declares " + std::to_string(result.entries) +
                                    " entries, more than a " + std::to_string(result.cd_size) +
                                    "-byte central directory can hold");
    }
    return result;
}

// Applies a ZIP64 extended-information extra field to the saturated 32-bit values.
void apply_zip64_extra(const std::string& path, const std::string& name,
                       std::span<const std::byte> extra, ZipRecord& record, bool usize_saturated,
                       bool csize_saturated, bool offset_saturated) {
    std::size_t pos = 0;
    while (pos + 4 <= extra.size()) {
        std::uint16_t id = load_le<std::uint16_t>(&extra[pos]);
        std::uint16_t length = load_le<std::uint16_t>(&extra[pos + 2]);
        pos += 4;
        if (length > extra.size() - pos) {
            throw_input_error(path, "entry '" + name + "': extra field runs past its header");
        }
        if (id == kZip64FieldId) {
            std::size_t at = pos;
            auto take = [&](std::uint64_t& field) {
                if (at + 8 > pos + length) {
                    throw_input_error(path, "entry '" + name + "': ZIP64 extra field is too short");
                }
                field = load_le<std::uint64_t>(&extra[at]);
                at += 8;
            };
            if (usize_saturated)
                take(record.size);
            if (csize_saturated)
                take(record.compressed_size);
            if (offset_saturated)
                take(record.local_header_offset);
            return;
        }
        pos += length;
    }
    if (usize_saturated || csize_saturated || offset_saturated) {
        throw_input_error(path,
                          "entry '" + name + "': sizes need a ZIP64 extra field, none is present");
    }
}

}  // namespace

TorchFileKind sniff_torch_file(std::span<const std::byte> first) noexcept {
    auto starts_with = [&](std::string_view magic) {
        return first.size() >= magic.size() &&
               std::memcmp(first.data(), magic.data(), magic.size()) == 0;
    };
    if (starts_with("PYTORCH1")) {
        return TorchFileKind::kPreviewZip;
    }
    if (starts_with("PK\x03\x04")) {
        return TorchFileKind::kZip;
    }
    // The legacy format begins with the pickled magic number 0x1950a86a20f9469cfc6c:
    // PROTO 2, LONG1 of 10 bytes, then the number little-endian. torch.save given another
    // pickle protocol (3 to 5) starts with that PROTO opcode instead; the legacy reader checks
    // the number itself.
    if (starts_with(
            std::string_view("\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19", 14)) ||
        (first.size() >= 2 && first[0] == std::byte{0x80} && first[1] >= std::byte{3} &&
         first[1] <= std::byte{5})) {
        return TorchFileKind::kLegacyPickle;
    }
    if (first.size() >= 262 && std::memcmp(first.data() + 257, "ustar", 5) == 0) {
        return TorchFileKind::kLegacyTar;
    }
    return TorchFileKind::kUnknown;
}

TorchArchive TorchArchive::open(const io::File& file) {
    TorchArchive archive;
    archive.path_ = file.path();
    const std::string& path = archive.path_;
    archive.file_size_ = file.size();
    if (archive.file_size_ == 0) {
        throw_input_error(path, "file is empty, expected a torch.save zip archive");
    }

    std::array<std::byte, 512> head{};
    std::size_t head_size =
        file.read_at_most(0, std::span(head).first(std::min<std::size_t>(
                                 head.size(), static_cast<std::size_t>(archive.file_size_))));
    switch (sniff_torch_file(std::span(head).first(head_size))) {
        case TorchFileKind::kZip:
            break;
        case TorchFileKind::kLegacyPickle:
            // TorchFile reads such files with the legacy reader (legacy_archive.hpp).
            throw_input_error(path,
                              "is in torch's legacy (non-zip) serialization format, written with "
                              "_use_new_zipfile_serialization=False, not a zip archive");
        case TorchFileKind::kLegacyTar:
            throw_unsupported(path,
                              "is a pre-1.0 torch tar archive; only zip-format torch.save "
                              "files are supported");
        case TorchFileKind::kPreviewZip:
            throw_unsupported(path,
                              "uses PyTorch's preview zip format (PYTORCH1); re-save it "
                              "with torch >= 1.6");
        case TorchFileKind::kUnknown:
            throw_input_error(path,
                              "is not a torch.save file: expected a zip archive (bytes "
                              "PK\\3\\4) at offset 0");
    }
    if (archive.file_size_ < kLocalHeaderSize + kEndRecordSize) {
        throw_input_error(path, "file of " + std::to_string(archive.file_size_) +
                                    " bytes is too short for a zip archive");
    }

    EndOfDirectory end = read_end_of_directory(file, archive.file_size_);
    std::vector<std::byte> directory = read_bytes(file, end.cd_offset, end.cd_size);

    archive.records_.reserve(static_cast<std::size_t>(end.entries));
    std::size_t pos = 0;
    for (std::uint64_t index = 0; index < end.entries; ++index) {
        if (directory.size() - pos < kCentralHeaderSize ||
            load_le<std::uint32_t>(&directory[pos]) != kCentralHeaderSignature) {
            throw_input_error(path, "central directory entry " + std::to_string(index) +
                                        " at offset " + std::to_string(end.cd_offset + pos) +
                                        " is missing or corrupt");
        }
        const std::byte* header = &directory[pos];
        ZipRecord record;
        record.flags = load_le<std::uint16_t>(header + 8);
        record.method = load_le<std::uint16_t>(header + 10);
        record.crc32 = load_le<std::uint32_t>(header + 16);
        std::uint32_t csize32 = load_le<std::uint32_t>(header + 20);
        std::uint32_t usize32 = load_le<std::uint32_t>(header + 24);
        std::size_t name_len = load_le<std::uint16_t>(header + 28);
        std::size_t extra_len = load_le<std::uint16_t>(header + 30);
        std::size_t comment_len = load_le<std::uint16_t>(header + 32);
        std::uint32_t offset32 = load_le<std::uint32_t>(header + 42);
        std::size_t variable = name_len + extra_len + comment_len;
        if (directory.size() - pos - kCentralHeaderSize < variable) {
            throw_input_error(path, "central directory entry " + std::to_string(index) +
                                        " runs past the end of the directory");
        }
        std::string full_name(reinterpret_cast<const char*>(header + kCentralHeaderSize), name_len);
        record.compressed_size = csize32;
        record.size = usize32;
        record.local_header_offset = offset32;
        apply_zip64_extra(path, full_name,
                          std::span(header + kCentralHeaderSize + name_len, extra_len), record,
                          usize32 == 0xFFFFFFFF, csize32 == 0xFFFFFFFF, offset32 == 0xFFFFFFFF);
        pos += kCentralHeaderSize + variable;

        if (full_name.empty()) {
            throw_input_error(
                path, "central directory entry " + std::to_string(index) + " has an empty name");
        }
        if (archive.records_.empty()) {
            auto slash = full_name.find('/');
            if (slash == std::string::npos || slash == 0) {
                throw_input_error(path, "first entry '" + full_name +
                                            "' is not inside an archive folder, as torch.save "
                                            "writes every record");
            }
            archive.prefix_ = full_name.substr(0, slash);
        }
        if (full_name.size() <= archive.prefix_.size() + 1 ||
            full_name.compare(0, archive.prefix_.size(), archive.prefix_) != 0 ||
            full_name[archive.prefix_.size()] != '/') {
            throw_input_error(path, "entry '" + full_name + "' is not under the archive folder '" +
                                        archive.prefix_ + "/'");
        }
        record.name = full_name.substr(archive.prefix_.size() + 1);
        if (record.local_header_offset > end.cd_offset ||
            end.cd_offset - record.local_header_offset < kLocalHeaderSize ||
            record.compressed_size >
                end.cd_offset - record.local_header_offset - kLocalHeaderSize) {
            throw_input_error(path, "record '" + full_name + "' (local header at " +
                                        std::to_string(record.local_header_offset) + ", " +
                                        std::to_string(record.compressed_size) +
                                        " bytes) does not fit before the central directory");
        }
        archive.records_.push_back(std::move(record));
    }
    if (archive.records_.empty()) {
        throw_input_error(path, "zip archive has no entries");
    }

    archive.sorted_.resize(archive.records_.size());
    for (std::uint32_t i = 0; i < archive.sorted_.size(); ++i) {
        archive.sorted_[i] = i;
    }
    std::sort(archive.sorted_.begin(), archive.sorted_.end(),
              [&](std::uint32_t a, std::uint32_t b) {
                  return archive.records_[a].name < archive.records_[b].name;
              });
    for (std::size_t i = 1; i < archive.sorted_.size(); ++i) {
        if (archive.records_[archive.sorted_[i]].name ==
            archive.records_[archive.sorted_[i - 1]].name) {
            throw_input_error(path, "record '" + archive.records_[archive.sorted_[i]].name +
                                        "' appears twice in the zip directory");
        }
    }

    // torch >= 2.1 records the byte order; older files are little-endian (the only order
    // torch has ever been released for in practice).
    if (const ZipRecord* order = archive.find("byteorder")) {
        std::vector<std::byte> bytes = archive.read_record(file, *order, 16);
        std::string_view text = as_string_view(bytes);
        while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) {
            text.remove_suffix(1);
        }
        if (text == "big") {
            throw_unsupported(path,
                              "archive was written on a big-endian machine (byteorder = "
                              "big); only little-endian checkpoints are supported");
        }
        if (text != "little") {
            throw_input_error(path, "record 'byteorder' holds '" + std::string(text) +
                                        "', expected 'little' or 'big'");
        }
    }
    return archive;
}

const ZipRecord* TorchArchive::find(std::string_view name) const noexcept {
    auto it = std::lower_bound(
        sorted_.begin(), sorted_.end(), name,
        [&](std::uint32_t index, std::string_view key) { return records_[index].name < key; });
    if (it != sorted_.end() && records_[*it].name == name) {
        return &records_[*it];
    }
    return nullptr;
}

const ZipRecord& TorchArchive::require(std::string_view name) const {
    const ZipRecord* record = find(name);
    if (record == nullptr) {
        throw_input_error(
            path_, "missing record '" + prefix_ + "/" + std::string(name) + "' in the zip archive");
    }
    return *record;
}

std::uint64_t TorchArchive::data_offset(const io::File& file, const ZipRecord& record) const {
    const std::string full_name = prefix_ + "/" + record.name;
    if ((record.flags & kFlagEncrypted) != 0) {
        throw_unsupported(path_, "record '" + full_name + "' is encrypted");
    }
    if (record.method != 0) {
        throw_unsupported(path_, "record '" + full_name + "' is compressed (method " +
                                     std::to_string(record.method) +
                                     "); torch stores records uncompressed and this tool reads "
                                     "them in place");
    }
    if (record.compressed_size != record.size) {
        throw_input_error(path_, "stored record '" + full_name + "' has compressed size " +
                                     std::to_string(record.compressed_size) +
                                     " but uncompressed size " + std::to_string(record.size));
    }
    std::array<std::byte, kLocalHeaderSize> header{};
    file.read_exact(record.local_header_offset, header);
    if (load_le<std::uint32_t>(header.data()) != kLocalHeaderSignature) {
        throw_input_error(path_, "record '" + full_name + "': no local header at offset " +
                                     std::to_string(record.local_header_offset));
    }
    std::uint64_t name_len = load_le<std::uint16_t>(header.data() + 26);
    std::uint64_t extra_len = load_le<std::uint16_t>(header.data() + 28);
    std::uint64_t offset = record.local_header_offset + kLocalHeaderSize + name_len + extra_len;
    if (offset > file_size_ || record.size > file_size_ - offset) {
        throw_input_error(path_, "record '" + full_name + "' (" + std::to_string(record.size) +
                                     " bytes at offset " + std::to_string(offset) +
                                     ") extends past the end of the file (" +
                                     std::to_string(file_size_) + " bytes)");
    }
    return offset;
}

std::vector<std::byte> TorchArchive::read_record(const io::File& file, const ZipRecord& record,
                                                 std::uint64_t max_bytes) const {
    const std::string full_name = prefix_ + "/" + record.name;
    if (record.size > max_bytes) {
        throw_input_error(path_, "record '" + full_name + "' declares " +
                                     std::to_string(record.size) +
                                     " bytes, more than the limit of " + std::to_string(max_bytes));
    }
    std::uint64_t offset = data_offset(file, record);
    std::vector<std::byte> bytes = read_bytes(file, offset, record.size);
    if (record.crc32 != 0) {
        uLong crc = crc32(0L, Z_NULL, 0);
        std::size_t done = 0;
        while (done < bytes.size()) {
            auto chunk = static_cast<uInt>(std::min<std::size_t>(bytes.size() - done, 1u << 30));
            crc = crc32(crc, reinterpret_cast<const Bytef*>(bytes.data() + done), chunk);
            done += chunk;
        }
        if (static_cast<std::uint32_t>(crc) != record.crc32) {
            throw_input_error(path_, "record '" + full_name + "' fails its CRC-32 check (stored " +
                                         hex32(record.crc32) + ", computed " +
                                         hex32(static_cast<std::uint32_t>(crc)) +
                                         "): the file is corrupt");
        }
    }
    return bytes;
}

}  // namespace z2f::container
