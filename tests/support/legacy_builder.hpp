// Builds files in torch's legacy (non-zip) serialization format for the tests, independently of
// the reader (src/container/legacy_archive.hpp describes the bytes): the magic number, protocol
// version and sys_info pickles, the object pickle, the storage key list, then each storage's
// eight-byte element count and bytes. Every part can be replaced to make a malformed file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/dtype.hpp"
#include "pickle/pickle_writer.hpp"

namespace z2f::testing {

struct LegacyStorageBytes {
    std::string key;
    DType dtype = DType::kF32;
    std::vector<std::byte> bytes;       // numel x itemsize of them
    std::optional<std::int64_t> count;  // the count written in front; numel when unset
};

struct LegacyFileParts {
    std::vector<std::byte> magic;     // a pickle; legacy_magic_pickle() by default
    std::vector<std::byte> version;   // a pickle of 1001 by default
    std::vector<std::byte> sys_info;  // a pickle of torch's sys_info dict by default
    pickle::PickleValue object;
    // The key list written after the object; the storages' keys in order when unset.
    std::optional<pickle::PickleValue> keys;
    std::vector<LegacyStorageBytes> storages;
    std::vector<std::byte> trailer;  // bytes after the last storage (none in a real file)
};

// PROTO 2, LONG1 of the 10-byte magic number 0x1950a86a20f9469cfc6c, STOP.
std::vector<std::byte> legacy_magic_pickle();
// {'protocol_version': 1001, 'little_endian': little_endian, 'type_sizes': {...}}.
std::vector<std::byte> legacy_sys_info_pickle(bool little_endian = true);

// The persistent id of a storage as the legacy format writes it:
// ('storage', torch.<X>Storage, key, 'cpu', numel, None).
pickle::PickleValue legacy_storage_id(DType dtype, const std::string& key, std::uint64_t numel);
// _rebuild_tensor_v2(storage, offset, shape, contiguous strides, False, OrderedDict()).
pickle::PickleValue legacy_tensor(DType dtype, const std::string& key, std::uint64_t storage_numel,
                                  std::uint64_t offset, const std::vector<std::uint64_t>& shape);

// Default magic, version and sys_info for `object` and `storages`.
LegacyFileParts legacy_parts(pickle::PickleValue object, std::vector<LegacyStorageBytes> storages);
std::vector<std::byte> build_legacy_file(const LegacyFileParts& parts);

}  // namespace z2f::testing
