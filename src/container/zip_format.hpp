// The zip archive format of torch.save files, in one place: the byte layout and its constants,
// shared by the reader (zip_reader.hpp), which accepts what any zip writer may produce within
// this layout, and the writer (zip_writer.hpp), which produces exactly what torch.save does.
// Integers are little-endian; the PKWARE APPNOTE is the general reference.
//
// As PyTorch's writer (caffe2/serialize/inline_container.cc on top of miniz, opened with
// MZ_ZIP_FLAG_WRITE_ZIP64) lays it out. Every record is STORED (method 0) and its data starts on
// a 64-byte boundary:
//
//   local header, at offset H (30 bytes + name + extra)
//     u32 0x04034b50 "PK\3\4" | u16 version needed 0 | u16 flags | u16 method 0
//     u16 time 0 | u16 date 0 | u32 crc 0 | u32 csize 0 | u32 usize 0
//     u16 name_len | u16 extra_len | name (UTF-8, "<archive>/<record>")
//     extra = [zip64 field] + FB field
//       zip64 field, only when size >= 0xFFFFFFFF or H >= 0xFFFFFFFF:
//         u16 0x0001 | u16 len | [u64 size, u64 0] if size is large | [u64 H] if H is large
//         (miniz writes the compressed size as 0 here: it is not known before the data)
//       FB field: 'F' 'B' | u16 pad | pad bytes of 'Z'
//         pad is chosen so that the data offset H + 30 + name_len + extra_len is a multiple of
//         64 (torch's detail::getPadding, see torch_padding())
//   data: `size` bytes
//   data descriptor, only when size > 0:
//     u32 0x08074b50 "PK\7\8" | u32 crc | csize, usize: u32 each, or u64 each when the local
//     header carries a zip64 field
//
//   flags are 0x0808 (bit 3: sizes in a data descriptor, bit 11: UTF-8 name) for records with
//   data and 0x0800 for empty ones: miniz writes no descriptor for an empty record, so its
//   local header (CRC 0, sizes 0) is already exact.
//
//   central directory, one header per record, in record order (46 bytes + name + extra)
//     u32 0x02014b50 "PK\1\2" | u16 made by 0 | u16 needed 0 | u16 flags | u16 method 0
//     u16 time 0 | u16 date 0 | u32 crc | u32 min(size, 0xFFFFFFFF) twice (csize, usize)
//     u16 name_len | u16 extra_len | u16 comment 0 | u16 disk 0 | u16 internal attr 0
//     u32 external attr 0 | u32 min(H, 0xFFFFFFFF) | name
//     extra: u16 0x0001 | u16 len | [u64 usize, u64 csize] if size >= 0xFFFFFFFF
//            | [u64 H] if H >= 0xFFFFFFFF; absent when neither is large
//   ZIP64 end of central directory record, ALWAYS (miniz in zip64 mode), 56 bytes
//     u32 0x06064b50 "PK\6\6" | u64 44 | u16 made by 0x031E | u16 needed 45
//     u32 disk 0 | u32 cd disk 0 | u64 entries | u64 entries | u64 cd size | u64 cd offset
//   ZIP64 end of central directory locator, 20 bytes
//     u32 0x07064b50 "PK\6\7" | u32 disk 0 | u64 offset of the ZIP64 end record | u32 disks 1
//   end of central directory record, 22 bytes
//     u32 0x06054b50 "PK\5\6" | u16 disk 0 | u16 cd disk 0 | u16 min(entries, 0xFFFF) twice
//     u32 min(cd size, 0xFFFFFFFF) | u32 min(cd offset, 0xFFFFFFFF) | u16 comment 0
//
// Time and date are 0 and nothing random is written, so the archive is a pure function of its
// records. CRCs are real CRC-32s: torch.load never checks them, Python's zipfile does.
//
// What a reader must also accept (other writers, other torch versions): sizes in the local
// header (flag bit 3 clear), a ZIP64 extra field whose 8-byte values appear only for the
// fields saturated at 0xFFFFFFFF (usize, csize, offset, in that order), an end record comment,
// and no ZIP64 records at all for small archives. Encrypted (flag bit 0) or compressed records
// are refused: torch never writes them. Sizes and offsets always come from the central
// directory; a record's data starts at local_header_offset + 30 + name_len + extra_len with the
// lengths of the *local* header (the two headers' extra fields differ).
#pragma once

#include <cstdint>

namespace z2f::container::zip {

inline constexpr std::uint32_t kLocalHeaderSignature = 0x04034b50;    // "PK\3\4"
inline constexpr std::uint32_t kDescriptorSignature = 0x08074b50;     // "PK\7\8"
inline constexpr std::uint32_t kCentralHeaderSignature = 0x02014b50;  // "PK\1\2"
inline constexpr std::uint32_t kZip64EndSignature = 0x06064b50;       // "PK\6\6"
inline constexpr std::uint32_t kZip64LocatorSignature = 0x07064b50;   // "PK\6\7"
inline constexpr std::uint32_t kEndSignature = 0x06054b50;            // "PK\5\6"

inline constexpr std::uint64_t kLocalHeaderSize = 30;
inline constexpr std::uint64_t kCentralHeaderSize = 46;
inline constexpr std::uint64_t kZip64EndRecordSize = 56;
inline constexpr std::uint64_t kZip64LocatorSize = 20;
inline constexpr std::uint64_t kEndRecordSize = 22;
inline constexpr std::uint64_t kEndRecordsSize =
    kZip64EndRecordSize + kZip64LocatorSize + kEndRecordSize;
inline constexpr std::uint64_t kMaxCommentSize = 0xFFFF;

// A size or offset at or above this needs a zip64 field (miniz's MZ_UINT32_MAX rule).
inline constexpr std::uint64_t kZip64Limit = 0xFFFFFFFFu;
inline constexpr std::uint16_t kZip64FieldId = 0x0001;
// "FB" as a little-endian u16: the bytes 'F', 'B'.
inline constexpr std::uint16_t kPaddingFieldId = 'F' | ('B' << 8);
inline constexpr std::uint16_t kZip64MadeBy = 0x031E;  // what miniz writes (Unix, spec 3.0)
inline constexpr std::uint16_t kZip64Needed = 45;

inline constexpr std::uint16_t kFlagEncrypted = 0x0001;
inline constexpr std::uint16_t kFlagsWithDescriptor = 0x0808;
inline constexpr std::uint16_t kFlagsEmpty = 0x0800;

// Every record's data starts on a multiple of this file offset.
inline constexpr std::uint64_t kTorchAlignment = 64;

}  // namespace z2f::container::zip
