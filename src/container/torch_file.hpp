// A torch.save file opened for reading: its container and its parsed object pickle.
//
// Two containers: the zip archive of torch >= 1.6 (zip_reader.hpp: data.pkl and one record
// "data/<key>" per storage) and the legacy non-zip format (legacy_archive.hpp: pickles back to
// back, then the storages' bytes). The first bytes decide which. Readers above see one interface:
// the document, and tensors located as byte ranges of the file.
//
// Tensors in the pickle are views (storage, element offset, shape, strides). `locate()` turns
// one into the absolute file byte range of its data, after checking it against the storage it
// lives in: the storage's bytes exist and hold what the persistent id declares (numel x
// itemsize), the view lies inside them, and the view is contiguous. Storage bytes themselves are
// never read here.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/dtype.hpp"
#include "common/extent.hpp"
#include "container/legacy_archive.hpp"
#include "container/zip_reader.hpp"
#include "io/posix_file.hpp"
#include "pickle/machine.hpp"
#include "pickle/value.hpp"

namespace z2f::container {

// Upper bound on the object pickle; real DeepSpeed pickles are KBs to a few MBs.
inline constexpr std::uint64_t kMaxPickleBytes = std::uint64_t{1} << 30;

struct TensorBytes {
    DType dtype = DType::kF32;
    std::vector<std::uint64_t> shape;
    std::uint64_t numel = 0;
    std::uint64_t offset = 0;  // absolute file offset of element 0
    std::uint64_t length = 0;  // numel * itemsize
    std::string record;        // "data/<key>" (zip) or "storage <key>" (legacy), for messages
};

class TorchFile {
  public:
    static TorchFile open(const std::string& path);

    const std::string& path() const noexcept { return file_.path(); }
    const io::File& file() const noexcept { return file_; }
    std::uint64_t file_size() const noexcept { return file_size_; }
    // Bytes of the pickle the document comes from (data.pkl, or the legacy object pickle).
    std::uint64_t pickle_size() const noexcept { return pickle_size_; }
    // The zip directory, or nullptr for a file in the legacy format.
    const TorchArchive* zip() const noexcept { return zip_ ? &*zip_ : nullptr; }
    // The legacy format's layout, or nullptr for a zip file.
    const LegacyArchive* legacy() const noexcept { return legacy_ ? &*legacy_ : nullptr; }
    const pickle::Document& document() const noexcept { return document_; }
    const pickle::Value& root() const noexcept { return document_.root(); }

    // `what` names the tensor in messages, e.g. "optimizer_state_dict.fp32_flat_groups[0]".
    TensorBytes locate(const pickle::Tensor& tensor, std::string_view what) const;

    // The storages `locate` has handed out views of, in file order, as input `file` of a plan:
    // the records whose CRC the copy engine checks (a legacy file has none to check against).
    std::vector<InputRecord> located_records(std::uint32_t file) const;

  private:
    struct StorageBytes {
        std::uint64_t offset = 0;  // absolute offset of the first byte
        std::uint64_t size = 0;
    };
    // The bytes of storage `key`, or an input error saying they are not in the file.
    StorageBytes storage_bytes(const std::string& key, const std::string& prefix) const;
    std::string record_name(const std::string& key) const;

    io::File file_;
    std::uint64_t file_size_ = 0;
    std::uint64_t pickle_size_ = 0;
    std::optional<TorchArchive> zip_;
    std::optional<LegacyArchive> legacy_;
    pickle::Document document_;
    // Storage key -> its bytes, for every storage located so far.
    mutable std::map<std::string, StorageBytes> located_;
};

}  // namespace z2f::container
