// A torch.save file opened for reading: its zip directory and its parsed data.pkl.
//
// Tensors in the pickle are views (storage record, element offset, shape, strides).
// `locate()` turns one into the absolute file byte range of its data, after checking it against
// the record it lives in: the record exists and is stored, its size is what the persistent id
// declares (numel x itemsize), the view lies inside it, and the view is contiguous. Storage
// bytes themselves are never read here.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/dtype.hpp"
#include "common/extent.hpp"
#include "container/zip_reader.hpp"
#include "io/posix_file.hpp"
#include "pickle/machine.hpp"
#include "pickle/value.hpp"

namespace z2f::container {

// Upper bound on data.pkl; real DeepSpeed pickles are KBs to a few MBs.
inline constexpr std::uint64_t kMaxPickleBytes = std::uint64_t{1} << 30;

struct TensorBytes {
    DType dtype = DType::kF32;
    std::vector<std::uint64_t> shape;
    std::uint64_t numel = 0;
    std::uint64_t offset = 0;  // absolute file offset of element 0
    std::uint64_t length = 0;  // numel * itemsize
    std::string record;        // "data/<key>", for messages
};

class TorchFile {
  public:
    static TorchFile open(const std::string& path);

    const std::string& path() const noexcept { return file_.path(); }
    const io::File& file() const noexcept { return file_; }
    const TorchArchive& archive() const noexcept { return archive_; }
    const pickle::Document& document() const noexcept { return document_; }
    const pickle::Value& root() const noexcept { return document_.root(); }

    // `what` names the tensor in messages, e.g. "optimizer_state_dict.fp32_flat_groups[0]".
    TensorBytes locate(const pickle::Tensor& tensor, std::string_view what) const;

    // The storage records `locate` has handed out views of, in file order, as input `file` of
    // a plan: the records whose CRC the copy engine checks.
    std::vector<InputRecord> located_records(std::uint32_t file) const;

  private:
    io::File file_;
    TorchArchive archive_;
    pickle::Document document_;
    mutable std::unordered_map<std::string, std::uint64_t> data_offsets_;
};

}  // namespace z2f::container
