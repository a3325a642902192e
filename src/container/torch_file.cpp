#include "container/torch_file.hpp"

#include <algorithm>
#include <array>

#include "common/checked_math.hpp"
#include "common/errors.hpp"

namespace z2f::container {

TorchFile TorchFile::open(const std::string& path) {
    TorchFile torch_file;
    torch_file.file_ = io::File::open_read(path);
    torch_file.file_size_ = torch_file.file_.size();
    std::array<std::byte, 16> head{};
    const std::size_t head_size = torch_file.file_.read_at_most(0, head);
    if (sniff_torch_file(std::span(head).first(head_size)) == TorchFileKind::kLegacyPickle) {
        torch_file.legacy_ =
            LegacyArchive::open(torch_file.file_, torch_file.document_, kMaxPickleBytes);
        torch_file.pickle_size_ = torch_file.legacy_->pickle_size();
        return torch_file;
    }
    // Anything else is read as a zip archive, whose reader names what else it might be.
    torch_file.zip_ = TorchArchive::open(torch_file.file_);
    const ZipRecord& pickle_record = torch_file.zip_->require("data.pkl");
    std::vector<std::byte> bytes =
        torch_file.zip_->read_record(torch_file.file_, pickle_record, kMaxPickleBytes);
    torch_file.pickle_size_ = pickle_record.size;
    torch_file.document_ =
        pickle::parse_pickle(bytes, path + ": " + torch_file.zip_->prefix() + "/data.pkl");
    return torch_file;
}

std::string TorchFile::record_name(const std::string& key) const {
    return zip_ ? "data/" + key : "storage " + key;
}

TorchFile::StorageBytes TorchFile::storage_bytes(const std::string& key,
                                                 const std::string& prefix) const {
    if (auto known = located_.find(key); known != located_.end())
        return known->second;
    StorageBytes bytes;
    if (zip_) {
        const ZipRecord& record = zip_->require(record_name(key));
        bytes = {zip_->data_offset(file_, record), record.size};
    } else {
        const LegacyStorage* storage = legacy_->find(key);
        if (storage == nullptr) {
            throw_input_error(path(), prefix + "storage '" + key + "' has no bytes in the file");
        }
        bytes = {storage->data_offset, storage->size};
    }
    return bytes;
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
    out.record = record_name(storage.key);
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

    // The storage: untyped storages count bytes, typed ones elements.
    const std::uint64_t storage_item = storage.dtype ? dtype_size(*storage.dtype) : 1;
    auto storage_size = checked_mul(storage.numel, storage_item);
    const StorageBytes bytes = storage_bytes(storage.key, prefix);
    if (!storage_size || *storage_size != bytes.size) {
        throw_input_error(file_path, prefix + "record '" + out.record + "' holds " +
                                         std::to_string(bytes.size) +
                                         " bytes, but the pickle declares a storage of " +
                                         std::to_string(storage.numel) + " elements of " +
                                         std::to_string(storage_item) + " bytes");
    }
    auto view_begin = checked_mul(tensor.storage_offset, item);
    auto view_end = view_begin ? checked_add(*view_begin, out.length) : std::nullopt;
    if (!view_end || *view_end > bytes.size) {
        throw_input_error(file_path, prefix + "tensor view (element offset " +
                                         std::to_string(tensor.storage_offset) + ", " +
                                         std::to_string(out.numel) + " elements) runs past its " +
                                         std::to_string(bytes.size) + "-byte storage record '" +
                                         out.record + "'");
    }
    located_.emplace(storage.key, bytes);
    out.offset = bytes.offset + *view_begin;
    return out;
}

std::vector<InputRecord> TorchFile::located_records(std::uint32_t file) const {
    std::vector<InputRecord> records;
    for (const auto& [key, bytes] : located_) {
        InputRecord record{file, bytes.offset, bytes.size, 0, record_name(key)};
        if (zip_) {
            record.crc32 = zip_->require(record.name).crc32;
            record.name = zip_->prefix() + "/" + record.name;
        } else {
            record.format_has_no_crc = true;
        }
        records.push_back(std::move(record));
    }
    std::sort(records.begin(), records.end(),
              [](const InputRecord& a, const InputRecord& b) { return a.offset < b.offset; });
    return records;
}

}  // namespace z2f::container
