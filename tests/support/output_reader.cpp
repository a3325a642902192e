#include "support/output_reader.hpp"

#include <algorithm>
#include <filesystem>
#include <stdexcept>

#if Z2F_HAVE_HDF5
#include <hdf5.h>
#endif

#include "output/safetensors_reader.hpp"
#include "support/test_files.hpp"

namespace fs = std::filesystem;

namespace z2f::testing {

SafetensorsContent read_safetensors(const std::string& path) {
    std::vector<std::byte> bytes = read_file_bytes(path);
    output::SafetensorsHeader header = output::parse_safetensors_header(bytes, bytes.size(), path);
    SafetensorsContent content;
    content.metadata = header.metadata;
    for (const auto& info : header.tensors) {
        ExpectedTensor tensor;
        tensor.name = info.name;
        tensor.dtype = info.dtype;
        tensor.shape = info.shape;
        auto begin = bytes.begin() + static_cast<std::ptrdiff_t>(header.data_offset + info.begin);
        tensor.bytes.assign(begin, begin + static_cast<std::ptrdiff_t>(info.end - info.begin));
        content.tensors.push_back(std::move(tensor));
    }
    return content;
}

Hdf5Dataset read_hdf5_dataset(const std::string& path, const std::string& name) {
#if Z2F_HAVE_HDF5
    Hdf5Dataset out;
    hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    if (file < 0)
        throw std::runtime_error("cannot open " + path);
    hid_t dataset = H5Dopen2(file, name.c_str(), H5P_DEFAULT);
    if (dataset < 0) {
        H5Fclose(file);
        throw std::runtime_error(path + ": no dataset " + name);
    }
    hid_t space = H5Dget_space(dataset);
    int rank = H5Sget_simple_extent_ndims(space);
    std::vector<hsize_t> dims(static_cast<std::size_t>(std::max(rank, 0)));
    if (rank > 0)
        H5Sget_simple_extent_dims(space, dims.data(), nullptr);
    std::uint64_t count = 1;
    for (hsize_t d : dims) {
        out.shape.push_back(d);
        count *= d;
    }
    hid_t type = H5Dget_type(dataset);
    out.element_size = H5Tget_size(type);
    out.bytes.resize(static_cast<std::size_t>(count * out.element_size));
    if (count > 0 && H5Dread(dataset, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.bytes.data()) < 0) {
        throw std::runtime_error(path + ": cannot read " + name);
    }
    if (H5Aexists(dataset, "dtype") > 0) {
        hid_t attribute = H5Aopen(dataset, "dtype", H5P_DEFAULT);
        hid_t attribute_type = H5Aget_type(attribute);
        std::vector<char> text(H5Tget_size(attribute_type) + 1, '\0');
        H5Aread(attribute, attribute_type, text.data());
        out.dtype_attribute = std::string(text.data());
        H5Tclose(attribute_type);
        H5Aclose(attribute);
    }
    H5Tclose(type);
    H5Sclose(space);
    H5Dclose(dataset);
    H5Fclose(file);
    return out;
#else
    throw std::runtime_error(path + ": " + name + ": this build has no HDF5 to read it with");
#endif
}

std::vector<std::string> list_tree(const std::string& root) {
    std::vector<std::string> out;
    for (const auto& entry : fs::recursive_directory_iterator(root)) {
        if (entry.is_regular_file() && entry.path().filename() != ".zero2fp32-run.json")
            out.push_back(fs::relative(entry.path(), root).string());
    }
    std::sort(out.begin(), out.end());
    return out;
}

std::string compare_trees(const std::string& a, const std::string& b) {
    std::vector<std::string> left = list_tree(a);
    std::vector<std::string> right = list_tree(b);
    if (left != right) {
        return "different file lists under " + a + " and " + b;
    }
    for (const std::string& name : left) {
        if (read_file_bytes(a + "/" + name) != read_file_bytes(b + "/" + name)) {
            return name + " differs between " + a + " and " + b;
        }
    }
    return {};
}

}  // namespace z2f::testing
