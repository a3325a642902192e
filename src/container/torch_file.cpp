#include "container/torch_file.hpp"

#include <algorithm>

#include "common/checked_math.hpp"
#include "common/errors.hpp"

namespace z2f::container {

TorchFile TorchFile::open(const std::string& path) {
    TorchFile torch_file;
    torch_file.file_ = io::File::open_read(path);
    torch_file.archive_ = TorchArchive::open(torch_file.file_);
    const ZipRecord& pickle_record = torch_file.archive_.require("data.pkl");
    std::vector<std::byte> bytes =
        torch_file.archive_.read_record(torch_file.file_, pickle_record, kMaxPickleBytes);
    torch_file.document_ =
        pickle::parse_pickle(bytes, path + ": " + torch_file.archive_.prefix() + "/data.pkl");
    return torch_file;
}

TensorBytes TorchFile::locate(const pickle::Tensor& tensor, std::string_view what) const {
    const std::string& file_path = path();
    const std::string prefix = std::string(what) + ": ";
    const pickle::Storage& storage = *tensor.storage;
    if (!tensor.dtype) {
        throw_input_error(file_path, prefix + "tensor on an untyped storage has no dtype");
    }
    TensorBytes out;
    out.dtype = *tensor.dtype;
    out.shape = tensor.shape;
    out.record = "data/" + storage.key;
    const std::uint64_t item = dtype_size(out.dtype);

    auto numel = checked_numel(tensor.shape);
    if (!numel) {
        throw_input_error(file_path, prefix + "tensor shape's element count overflows 64 bits");
    }
    out.numel = *numel;
    auto length = checked_mul(out.numel, item);
    if (!length) {
        throw_input_error(file_path, prefix + "tensor byte size overflows 64 bits");
    }
    out.length = *length;

    // Contiguous (row-major) check: dimensions of size 1 may carry any stride.
    std::uint64_t expected = 1;
    for (std::size_t d = tensor.shape.size(); d-- > 0;) {
        if (tensor.shape[d] != 1 && out.numel != 0 &&
            (tensor.stride[d] < 0 || static_cast<std::uint64_t>(tensor.stride[d]) != expected)) {
            throw_input_error(file_path, prefix + "tensor is not contiguous (stride " +
                                             std::to_string(tensor.stride[d]) + " in dimension " +
                                             std::to_string(d) + ", expected " +
                                             std::to_string(expected) + ")");
        }
        expected *= tensor.shape[d] == 0 ? 1 : tensor.shape[d];
    }

    // The storage record: untyped storages count bytes, typed ones elements.
    const std::uint64_t storage_item = storage.dtype ? dtype_size(*storage.dtype) : 1;
    auto storage_bytes = checked_mul(storage.numel, storage_item);
    const ZipRecord& record = archive_.require(out.record);
    if (!storage_bytes || *storage_bytes != record.size) {
        throw_input_error(file_path, prefix + "record '" + out.record + "' holds " +
                                         std::to_string(record.size) +
                                         " bytes, but the pickle declares a storage of " +
                                         std::to_string(storage.numel) + " elements of " +
                                         std::to_string(storage_item) + " bytes");
    }
    auto view_begin = checked_mul(tensor.storage_offset, item);
    auto view_end = view_begin ? checked_add(*view_begin, out.length) : std::nullopt;
    if (!view_end || *view_end > record.size) {
        throw_input_error(file_path, prefix + "tensor view (element offset " +
                                         std::to_string(tensor.storage_offset) + ", " +
                                         std::to_string(out.numel) + " elements) runs past its " +
                                         std::to_string(record.size) + "-byte storage record '" +
                                         out.record + "'");
    }
    auto cached = data_offsets_.find(out.record);
    if (cached == data_offsets_.end()) {
        cached = data_offsets_.emplace(out.record, archive_.data_offset(file_, record)).first;
    }
    out.offset = cached->second + *view_begin;
    return out;
}

std::vector<InputRecord> TorchFile::located_records(std::uint32_t file) const {
    std::vector<InputRecord> records;
    for (const auto& [name, offset] : data_offsets_) {
        const ZipRecord& record = archive_.require(name);
        records.push_back(
            {file, offset, record.size, record.crc32, archive_.prefix() + "/" + name});
    }
    std::sort(records.begin(), records.end(),
              [](const InputRecord& a, const InputRecord& b) { return a.offset < b.offset; });
    return records;
}

}  // namespace z2f::container
