#include "tools/inspect_hdf5.hpp"

#include <array>
#include <cstring>
#include <iomanip>
#include <map>
#include <string_view>
#include <vector>

#include "common/errors.hpp"
#include "io/posix_file.hpp"

#if Z2F_HAVE_HDF5
#include <hdf5.h>
#endif

namespace z2f::tools {

bool looks_like_hdf5(const std::string& path) {
    static constexpr std::array<unsigned char, 8> kSignature = {0x89, 'H',  'D',  'F',
                                                                '\r', '\n', 0x1a, '\n'};
    io::File file = io::File::open_read(path);
    std::array<std::byte, 8> head{};
    return file.read_at_most(0, head) == head.size() &&
           std::memcmp(head.data(), kSignature.data(), head.size()) == 0;
}

#if Z2F_HAVE_HDF5
namespace {

// An HDF5 identifier closed when it goes out of scope.
class Id {
  public:
    Id(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
    ~Id() {
        if (id_ >= 0)
            close_(id_);
    }
    Id(const Id&) = delete;
    Id& operator=(const Id&) = delete;
    hid_t get() const noexcept { return id_; }
    bool valid() const noexcept { return id_ >= 0; }

  private:
    hid_t id_;
    herr_t (*close_)(hid_t);
};

// A fixed-length string attribute's text (NUL padding removed); variable-length strings and other
// types are described instead of read.
std::string attribute_text(hid_t object, const char* name) {
    Id attribute(H5Aopen(object, name, H5P_DEFAULT), H5Aclose);
    if (!attribute.valid())
        return "(unreadable)";
    Id type(H5Aget_type(attribute.get()), H5Tclose);
    if (H5Tget_class(type.get()) != H5T_STRING || H5Tis_variable_str(type.get()) > 0)
        return "(not a fixed-length string)";
    Id space(H5Aget_space(attribute.get()), H5Sclose);
    if (H5Sget_simple_extent_npoints(space.get()) != 1)
        return "(not a single string)";
    std::vector<char> text(H5Tget_size(type.get()) + 1, '\0');
    if (H5Aread(attribute.get(), type.get(), text.data()) < 0)
        return "(unreadable)";
    return std::string(text.data());
}

herr_t collect_attribute(hid_t object, const char* name, const H5A_info_t* /*info*/, void* data) {
    static_cast<std::vector<std::pair<std::string, std::string>>*>(data)->emplace_back(
        name, attribute_text(object, name));
    return 0;
}

herr_t collect_dataset_name(hid_t group, const char* name, const H5L_info_t* /*info*/, void* data) {
    Id object(H5Oopen(group, name, H5P_DEFAULT), H5Oclose);
    if (object.valid() && H5Iget_type(object.get()) == H5I_DATASET &&
        std::string_view(name) != "__names__")
        static_cast<std::vector<std::string>*>(data)->emplace_back(name);
    return 0;
}

// The tensor names in state-dict order: the converter's `__names__` dataset, or the root group's
// datasets by name in a file of another origin.
std::vector<std::string> tensor_names(hid_t file) {
    std::vector<std::string> names;
    if (H5Lexists(file, "__names__", H5P_DEFAULT) > 0) {
        Id dataset(H5Dopen2(file, "__names__", H5P_DEFAULT), H5Dclose);
        Id type(H5Dget_type(dataset.get()), H5Tclose);
        Id space(H5Dget_space(dataset.get()), H5Sclose);
        const hssize_t count = H5Sget_simple_extent_npoints(space.get());
        const std::size_t width = H5Tget_size(type.get());
        if (H5Tget_class(type.get()) == H5T_STRING && H5Tis_variable_str(type.get()) == 0 &&
            count >= 0 && width > 0) {
            std::vector<char> text(static_cast<std::size_t>(count) * width);
            if (count == 0 || H5Dread(dataset.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT,
                                      text.data()) >= 0) {
                for (hssize_t i = 0; i < count; ++i) {
                    const char* begin = text.data() + static_cast<std::size_t>(i) * width;
                    names.emplace_back(begin, strnlen(begin, width));
                }
                return names;
            }
        }
    }
    hsize_t index = 0;
    H5Literate(file, H5_INDEX_NAME, H5_ITER_INC, &index, collect_dataset_name, &names);
    return names;
}

// The dataset's element type in safetensors' names; the `dtype` attribute names what a raw
// integer type holds (bf16 and fp8 stored as their bits).
std::string dtype_text(hid_t dataset, hid_t type) {
    if (H5Aexists(dataset, "dtype") > 0) {
        const std::string stored = attribute_text(dataset, "dtype");
        if (stored == "bfloat16")
            return "BF16";
        if (stored == "float8_e4m3fn")
            return "F8_E4M3";
        if (stored == "float8_e5m2")
            return "F8_E5M2";
        return stored;
    }
    const std::size_t size = H5Tget_size(type);
    switch (H5Tget_class(type)) {
        case H5T_FLOAT: {
            if (size != 2)
                return "F" + std::to_string(size * 8);
            std::size_t sign = 0, exponent_pos = 0, exponent_size = 0, mantissa_pos = 0,
                        mantissa_size = 0;
            H5Tget_fields(type, &sign, &exponent_pos, &exponent_size, &mantissa_pos,
                          &mantissa_size);
            return exponent_size == 8 ? "BF16" : "F16";
        }
        case H5T_INTEGER:
            return (H5Tget_sign(type) == H5T_SGN_NONE ? "U" : "I") + std::to_string(size * 8);
        case H5T_ENUM:
            return "BOOL";
        case H5T_COMPOUND:
            return "C64";
        default:
            return "class " + std::to_string(static_cast<int>(H5Tget_class(type)));
    }
}

std::string shape_text(hid_t space) {
    const int rank = H5Sget_simple_extent_ndims(space);
    std::vector<hsize_t> dims(static_cast<std::size_t>(rank > 0 ? rank : 0));
    if (rank > 0)
        H5Sget_simple_extent_dims(space, dims.data(), nullptr);
    std::string text = "[";
    for (std::size_t i = 0; i < dims.size(); ++i)
        text += (i == 0 ? "" : ", ") + std::to_string(dims[i]);
    return text + "]";
}

}  // namespace

void print_hdf5(std::ostream& out, const std::string& path) {
    const std::uint64_t size = io::File::open_read(path).size();
    // HDF5 prints its own error stack to stderr by default; the message below says it once.
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    Id file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
    if (!file.valid())
        throw_input_error(path, "has HDF5's signature, but the HDF5 library cannot open it");
    out << "file: " << path << " (" << size << " bytes, HDF5)\n";
    std::vector<std::pair<std::string, std::string>> attributes;
    hsize_t attribute_index = 0;
    H5Aiterate2(file.get(), H5_INDEX_NAME, H5_ITER_INC, &attribute_index, collect_attribute,
                &attributes);
    for (const auto& [name, value] : attributes)
        out << "attribute: " << name << " = " << value << "\n";

    const std::vector<std::string> names = tensor_names(file.get());
    out << "tensors: " << names.size() << "\n";
    // A hard link is the same dataset under a second name: same storage address.
    std::map<haddr_t, std::string> first_name_at;
    for (const std::string& name : names) {
        Id dataset(H5Dopen2(file.get(), name.c_str(), H5P_DEFAULT), H5Dclose);
        if (!dataset.valid()) {
            out << "  " << std::left << std::setw(48) << name << "(no such dataset)\n";
            continue;
        }
        const haddr_t offset = H5Dget_offset(dataset.get());
        if (offset != HADDR_UNDEF) {
            auto [it, inserted] = first_name_at.emplace(offset, name);
            if (!inserted) {
                out << "  " << std::left << std::setw(48) << name << "= " << it->second
                    << " (hard link: tied alias)\n";
                continue;
            }
        }
        Id type(H5Dget_type(dataset.get()), H5Tclose);
        Id space(H5Dget_space(dataset.get()), H5Sclose);
        out << "  " << std::left << std::setw(48) << name << std::setw(6)
            << dtype_text(dataset.get(), type.get()) << std::setw(20) << shape_text(space.get())
            << std::right;
        if (offset == HADDR_UNDEF)
            out << " (no storage)\n";
        else
            out << " @ " << offset << ", " << H5Dget_storage_size(dataset.get()) << " bytes\n";
    }
}

#else

void print_hdf5(std::ostream& /*out*/, const std::string& path) {
    throw_usage_error(path +
                      " is an HDF5 file, and this build of zero2fp32 has no HDF5; configure it "
                      "with -DZ2F_WITH_HDF5=ON (HDF5's C library, without Z2F_STATIC_DEPS) and "
                      "build again");
}

#endif

}  // namespace z2f::tools
