// Reader of torch's legacy (non-zip) serialization: what torch.save writes when given
// _use_new_zipfile_serialization=False, as DeepSpeed does under
// "checkpoint": {"checkpoint_serialization": false}.
//
// The byte format: five pickles back to back, then every storage's bytes, then nothing.
//
//   pickle 1  the magic number 0x1950a86a20f9469cfc6c (an 80-bit int: LONG1 at protocol 2)
//   pickle 2  the format's protocol version, the int 1001
//   pickle 3  sys_info, a dict: {'protocol_version': 1001, 'little_endian': bool,
//             'type_sizes': {'short': 2, 'int': 4, 'long': 4 or 8}}
//   pickle 4  the saved object. Each storage is a persistent id
//             ('storage', torch.<Type>Storage, key, location, numel, view_metadata) whose
//             view_metadata is None (torch < 1.0 named views into a root storage there: refused
//             by the pickle machine); numel counts elements (bytes for UntypedStorage)
//   pickle 5  the storage keys, a list of str, in the order their bytes follow
//   then, for each key of that list in turn:
//             i64 count, little-endian (the storage's element count) | count x itemsize bytes
//             (itemsize of the storage type; 1 for UntypedStorage), with no padding
//
// Every pickle uses the protocol torch.save was given (2 unless told otherwise). Nothing carries
// a checksum. The pickles are read into memory (a window grown until each one ends); storage
// bytes are never read, only the eight-byte counts in front of them, each checked against the
// numel of the persistent id with that key.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "io/posix_file.hpp"
#include "pickle/value.hpp"

namespace z2f::container {

// One storage of a legacy file: where its bytes lie.
struct LegacyStorage {
    std::string key;
    std::uint64_t count_offset = 0;  // the i64 element count in front of the bytes
    std::uint64_t data_offset = 0;
    std::uint64_t size = 0;  // bytes
};

class LegacyArchive {
  public:
    // Reads the five pickles (each at most `max_pickle_bytes`) and walks the storages. Every
    // error names the file and says what the legacy format expected there; `document` receives
    // the saved object.
    static LegacyArchive open(const io::File& file, pickle::Document& document,
                              std::uint64_t max_pickle_bytes);

    const std::string& path() const noexcept { return path_; }
    std::uint64_t file_size() const noexcept { return file_size_; }
    // Where the saved object's pickle (pickle 4) lies.
    std::uint64_t pickle_offset() const noexcept { return pickle_offset_; }
    std::uint64_t pickle_size() const noexcept { return pickle_size_; }
    // In file order.
    const std::vector<LegacyStorage>& storages() const noexcept { return storages_; }
    const LegacyStorage* find(std::string_view key) const noexcept;

  private:
    std::string path_;
    std::uint64_t file_size_ = 0;
    std::uint64_t pickle_offset_ = 0;
    std::uint64_t pickle_size_ = 0;
    std::vector<LegacyStorage> storages_;
    std::unordered_map<std::string, std::size_t> by_key_;
};

}  // namespace z2f::container
