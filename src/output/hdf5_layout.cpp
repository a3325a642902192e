#include "output/hdf5_layout.hpp"

#include <algorithm>
#include <cstddef>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/errors.hpp"
#include "output/hdf5_api.hpp"
#include "output/hdf5_module.hpp"
#include "output/hdf5_recording_driver.hpp"

#if !H5_VERSION_GE(1, 10, 2)
#error "HDF5 >= 1.10.2 is needed (H5F_LIBVER_V18 as a library version bound)"
#endif

namespace z2f::output {
namespace {

using hdf5::check;
using hdf5::checked;
using hdf5::Handle;

// The largest stretch of a fixed region that HDF5 allocated but never wrote (leftovers of
// metadata aggregation blocks are a few KiB). Anything bigger means a dataset whose storage we
// did not account for, and would make us hold that many zero bytes in memory.
constexpr std::uint64_t kMaxUnwrittenBytes = std::uint64_t{1} << 20;

// The aggregation block sizes of HDF5's defaults, stated explicitly so that the layout does not
// depend on a library default changing.
constexpr hsize_t kMetadataBlockSize = 2048;
constexpr hsize_t kSmallDataBlockSize = 2048;

// ---------------------------------------------------------------------------------------------
// Which tensors go where

struct FileTensor {
    std::uint32_t index = 0;
    const plan::PlannedTensor* tensor = nullptr;
    // For a tied alias whose owner is in this file: the plan index of the tensor whose dataset
    // the hard link points to. -1 for tensors that get a dataset.
    std::int64_t link_target = -1;
};

std::string quote_name(std::string_view text) {
    std::string out = "'";
    out += text;
    out += "'";
    return out;
}

[[noreturn]] void throw_bad_name(std::string_view file, std::string_view name,
                                 std::string_view why) {
    throw_unsupported(
        file, "tensor name " + quote_name(name) + " cannot be stored in HDF5: " + std::string(why));
}

// Checks that every name is a usable HDF5 path and that no name is both an object and a group
// (e.g. "a" and "a/b"), before HDF5 would refuse it with a less helpful message.
void check_names(std::string_view file, const std::vector<FileTensor>& tensors) {
    enum class Kind : std::uint8_t { kGroup, kObject };
    std::map<std::string, Kind, std::less<>> paths;
    paths.emplace(std::string(kHdf5NamesDataset), Kind::kObject);
    for (const FileTensor& entry : tensors) {
        const std::string& name = entry.tensor->name;
        if (name.empty()) {
            throw_bad_name(file, name, "the name is empty");
        }
        if (name.find('\0') != std::string::npos) {
            throw_bad_name(file, name, "the name contains a NUL character");
        }
        std::size_t begin = 0;
        while (true) {
            const std::size_t slash = name.find('/', begin);
            const std::size_t end = slash == std::string::npos ? name.size() : slash;
            const std::string_view component(name.data() + begin, end - begin);
            if (component.empty()) {
                throw_bad_name(file, name, "a '/'-separated component is empty");
            }
            if (component == "." || component == "..") {
                throw_bad_name(file, name, "'.' and '..' are not allowed as path components");
            }
            const std::string prefix = name.substr(0, end);
            const bool last = slash == std::string::npos;
            const auto [it, inserted] = paths.emplace(prefix, last ? Kind::kObject : Kind::kGroup);
            if (!inserted) {
                if (last) {
                    throw_bad_name(file, name,
                                   it->second == Kind::kGroup
                                       ? "another tensor name uses it as a group"
                                       : "the name is used twice (or is reserved for the "
                                         "names dataset)");
                }
                if (it->second == Kind::kObject) {
                    throw_bad_name(file, name, quote_name(prefix) + " is a tensor, not a group");
                }
            }
            if (last) {
                break;
            }
            begin = slash + 1;
        }
    }
}

// Sorts the file's tensors into state-dict order and decides which aliases become hard links.
std::vector<FileTensor> file_tensors(std::string_view file, const plan::TensorPlan& plan,
                                     std::span<const std::uint32_t> tensor_indices) {
    std::vector<std::uint32_t> indices(tensor_indices.begin(), tensor_indices.end());
    std::sort(indices.begin(), indices.end());
    if (std::adjacent_find(indices.begin(), indices.end()) != indices.end()) {
        throw_internal_error(std::string(file) + ": a tensor is listed twice for one HDF5 file");
    }
    if (!indices.empty() && indices.back() >= plan.tensors.size()) {
        throw_internal_error(std::string(file) + ": tensor index " +
                             std::to_string(indices.back()) + " is outside the plan");
    }

    std::vector<FileTensor> tensors;
    tensors.reserve(indices.size());
    std::unordered_map<std::uint32_t, std::size_t> position;
    for (std::uint32_t index : indices) {
        position.emplace(index, tensors.size());
        tensors.push_back({index, &plan.tensors[index], -1});
    }
    auto linked_owner = [&](const plan::PlannedTensor& tensor) -> std::int64_t {
        if (tensor.alias_of < 0) {
            return -1;
        }
        if (static_cast<std::uint64_t>(tensor.alias_of) >= plan.tensors.size()) {
            throw_internal_error(std::string(file) + ": alias " + quote_name(tensor.name) +
                                 " points outside the plan");
        }
        return position.contains(static_cast<std::uint32_t>(tensor.alias_of)) ? tensor.alias_of
                                                                              : -1;
    };
    for (FileTensor& entry : tensors) {
        std::int64_t target = linked_owner(*entry.tensor);
        if (target < 0) {
            continue;
        }
        // Follow alias chains to the tensor that owns a dataset.
        for (std::size_t steps = 0;; ++steps) {
            const std::int64_t next = linked_owner(plan.tensors[static_cast<std::size_t>(target)]);
            if (next < 0) {
                break;
            }
            if (steps > tensors.size()) {
                throw_internal_error(std::string(file) + ": alias " +
                                     quote_name(entry.tensor->name) + " is part of an alias cycle");
            }
            target = next;
        }
        const plan::PlannedTensor& owner = plan.tensors[static_cast<std::size_t>(target)];
        if (owner.shape != entry.tensor->shape ||
            owner.output_dtype != entry.tensor->output_dtype) {
            throw_internal_error(std::string(file) + ": alias " + quote_name(entry.tensor->name) +
                                 " differs in shape or dtype from its owner " +
                                 quote_name(owner.name));
        }
        entry.link_target = target;
    }
    return tensors;
}

std::uint64_t checked_output_bytes(std::string_view file, const plan::PlannedTensor& tensor) {
    std::uint64_t bytes = dtype_size(tensor.output_dtype);
    for (std::uint64_t dim : tensor.shape) {
        if (__builtin_mul_overflow(bytes, dim, &bytes)) {
            throw_unsupported(file, "tensor " + quote_name(tensor.name) + " is too large");
        }
    }
    return bytes;
}

// ---------------------------------------------------------------------------------------------
// HDF5 objects

Handle copy_type(hid_t predefined) {
    return checked(H5Tcopy(predefined), H5Tclose, "copying a predefined datatype");
}

// A float type of `bits` total derived from IEEE binary32 little-endian.
Handle small_float_type(std::size_t mantissa_bits, std::size_t exponent_bits,
                        std::size_t exponent_bias) {
    Handle type = copy_type(H5T_IEEE_F32LE);
    const std::size_t sign_position = mantissa_bits + exponent_bits;
    check(H5Tset_fields(type.get(), sign_position, mantissa_bits, exponent_bits, 0, mantissa_bits),
          "setting the bit fields of a 16-bit float type");
    check(H5Tset_size(type.get(), 2), "resizing a 16-bit float type");
    check(H5Tset_ebias(type.get(), exponent_bias), "setting the exponent bias of a float type");
    return type;
}

Handle bool_type() {
    Handle type = checked(H5Tenum_create(H5T_STD_I8LE), H5Tclose, "creating the bool enum type");
    const std::int8_t false_value = 0;
    const std::int8_t true_value = 1;
    check(H5Tenum_insert(type.get(), "FALSE", &false_value), "adding FALSE to the bool enum");
    check(H5Tenum_insert(type.get(), "TRUE", &true_value), "adding TRUE to the bool enum");
    return type;
}

Handle complex64_type() {
    Handle type = checked(H5Tcreate(H5T_COMPOUND, 8), H5Tclose, "creating the complex64 type");
    check(H5Tinsert(type.get(), "r", 0, H5T_IEEE_F32LE), "adding the real part to complex64");
    check(H5Tinsert(type.get(), "i", 4, H5T_IEEE_F32LE), "adding the imaginary part to complex64");
    return type;
}

struct ElementType {
    Handle type;
    // Value of the dataset's @dtype attribute when the HDF5 type only carries the raw bits.
    std::string_view dtype_attribute;
};

ElementType element_type(DType dtype, bool bf16_as_float) {
    switch (dtype) {
        case DType::kF64:
            return {copy_type(H5T_IEEE_F64LE), {}};
        case DType::kF32:
            return {copy_type(H5T_IEEE_F32LE), {}};
        case DType::kF16:
            return {small_float_type(10, 5, 15), {}};
        case DType::kBF16:
            if (bf16_as_float) {
                return {small_float_type(7, 8, 127), {}};
            }
            return {copy_type(H5T_STD_U16LE), torch_dtype_name(dtype)};
        case DType::kI64:
            return {copy_type(H5T_STD_I64LE), {}};
        case DType::kI32:
            return {copy_type(H5T_STD_I32LE), {}};
        case DType::kI16:
            return {copy_type(H5T_STD_I16LE), {}};
        case DType::kI8:
            return {copy_type(H5T_STD_I8LE), {}};
        case DType::kU8:
            return {copy_type(H5T_STD_U8LE), {}};
        case DType::kU16:
            return {copy_type(H5T_STD_U16LE), {}};
        case DType::kU32:
            return {copy_type(H5T_STD_U32LE), {}};
        case DType::kU64:
            return {copy_type(H5T_STD_U64LE), {}};
        case DType::kBool:
            return {bool_type(), {}};
        case DType::kC64:
            return {complex64_type(), {}};
        case DType::kF8E4M3:
        case DType::kF8E5M2:
            return {copy_type(H5T_STD_U8LE), torch_dtype_name(dtype)};
    }
    throw_internal_error("HDF5 layout: unknown dtype");
}

// Fixed-length, NUL-padded UTF-8 string type of `length` bytes (at least 1: HDF5 has no
// zero-sized types).
Handle string_type(std::size_t length) {
    Handle type = copy_type(H5T_C_S1);
    check(H5Tset_size(type.get(), std::max<std::size_t>(length, 1)), "sizing a string type");
    check(H5Tset_strpad(type.get(), H5T_STR_NULLPAD), "setting string padding");
    check(H5Tset_cset(type.get(), H5T_CSET_UTF8), "setting the string character set");
    return type;
}

void write_string_attribute(hid_t object, const char* name, std::string_view value) {
    Handle type = string_type(value.size());
    Handle space = checked(H5Screate(H5S_SCALAR), H5Sclose, "creating a scalar dataspace");
    Handle attribute = checked(H5Acreate2(object, name, type.get(), space.get(),
                                          hdf5::default_plist(), hdf5::default_plist()),
                               H5Aclose, std::string("creating attribute ") + name);
    std::vector<char> bytes(std::max<std::size_t>(value.size(), 1), '\0');
    std::copy(value.begin(), value.end(), bytes.begin());
    check(H5Awrite(attribute.get(), type.get(), bytes.data()),
          std::string("writing attribute ") + name);
    attribute.close(std::string("closing attribute ") + name);
}

struct PropertyLists {
    Handle file_create;
    Handle file_access;
    Handle group_create;
    Handle dataset_create;  // tensors and __names__: contiguous, early, never filled
    Handle link_create;
};

PropertyLists make_property_lists(hdf5::RecordedFile& recorded) {
    PropertyLists lists;
    lists.file_create =
        checked(H5Pcreate(H5P_FILE_CREATE), H5Pclose, "creating a file creation list");
    // The root group is created from the file creation list: no timestamps on it either.
    check(H5Pset_obj_track_times(lists.file_create.get(), false), "disabling root group times");

    lists.file_access =
        checked(H5Pcreate(H5P_FILE_ACCESS), H5Pclose, "creating a file access list");
    const hid_t fapl = lists.file_access.get();
    hdf5::use_recording_driver(fapl, recorded);
    check(H5Pset_libver_bounds(fapl, H5F_LIBVER_V18, H5F_LIBVER_V18),
          "setting library version bounds");
    check(H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG), "setting the file close degree");
    check(H5Pset_meta_block_size(fapl, kMetadataBlockSize), "setting the metadata block size");
    check(H5Pset_small_data_block_size(fapl, kSmallDataBlockSize),
          "setting the small data block size");
    check(H5Pset_alignment(fapl, 1, 1), "setting the alignment");

    lists.group_create =
        checked(H5Pcreate(H5P_GROUP_CREATE), H5Pclose, "creating a group creation list");
    check(H5Pset_obj_track_times(lists.group_create.get(), false), "disabling group times");

    lists.dataset_create =
        checked(H5Pcreate(H5P_DATASET_CREATE), H5Pclose, "creating a dataset creation list");
    const hid_t dcpl = lists.dataset_create.get();
    check(H5Pset_obj_track_times(dcpl, false), "disabling dataset times");
    check(H5Pset_layout(dcpl, H5D_CONTIGUOUS), "choosing contiguous layout");
    check(H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY), "choosing early allocation");
    check(H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER), "choosing fill time never");

    lists.link_create =
        checked(H5Pcreate(H5P_LINK_CREATE), H5Pclose, "creating a link creation list");
    check(H5Pset_char_encoding(lists.link_create.get(), H5T_CSET_UTF8),
          "choosing UTF-8 link names");
    return lists;
}

// Creates the groups on the way to `name` that do not exist yet, in path order.
void create_parent_groups(hid_t file, const std::string& name, const PropertyLists& lists,
                          std::set<std::string>& groups) {
    std::size_t slash = name.find('/');
    while (slash != std::string::npos) {
        std::string path = name.substr(0, slash);
        if (!groups.contains(path)) {
            Handle group = checked(H5Gcreate2(file, path.c_str(), lists.link_create.get(),
                                              lists.group_create.get(), hdf5::default_plist()),
                                   H5Gclose, "creating group " + quote_name(path));
            group.close("closing group " + quote_name(path));
            groups.insert(std::move(path));
        }
        slash = name.find('/', slash + 1);
    }
}

void write_names_dataset(hid_t file, const std::vector<FileTensor>& tensors,
                         const PropertyLists& lists) {
    std::size_t longest = 0;
    for (const FileTensor& entry : tensors) {
        longest = std::max(longest, entry.tensor->name.size());
    }
    longest = std::max<std::size_t>(longest, 1);
    Handle type = string_type(longest);
    const hsize_t count = tensors.size();
    Handle space =
        checked(H5Screate_simple(1, &count, nullptr), H5Sclose, "creating the names dataspace");
    const std::string name(kHdf5NamesDataset);
    Handle dataset =
        checked(H5Dcreate2(file, name.c_str(), type.get(), space.get(), lists.link_create.get(),
                           lists.dataset_create.get(), hdf5::default_plist()),
                H5Dclose, "creating the names dataset");
    if (!tensors.empty()) {
        std::vector<char> bytes(tensors.size() * longest, '\0');
        for (std::size_t i = 0; i < tensors.size(); ++i) {
            const std::string& tensor_name = tensors[i].tensor->name;
            std::copy(tensor_name.begin(), tensor_name.end(),
                      bytes.begin() + static_cast<std::ptrdiff_t>(i * longest));
        }
        check(H5Dwrite(dataset.get(), type.get(), hdf5::all_selection(), hdf5::all_selection(),
                       hdf5::default_plist(), bytes.data()),
              "writing the names dataset");
    }
    dataset.close("closing the names dataset");
}

Handle tensor_dataspace(std::string_view file, const plan::PlannedTensor& tensor) {
    if (tensor.shape.empty()) {
        return checked(H5Screate(H5S_SCALAR), H5Sclose, "creating a scalar dataspace");
    }
    if (tensor.shape.size() > H5S_MAX_RANK) {
        throw_unsupported(file, "tensor " + quote_name(tensor.name) + " has " +
                                    std::to_string(tensor.shape.size()) +
                                    " dimensions; HDF5 allows at most " +
                                    std::to_string(H5S_MAX_RANK));
    }
    std::vector<hsize_t> dims(tensor.shape.begin(), tensor.shape.end());
    return checked(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), H5Sclose,
                   "creating the dataspace of " + quote_name(tensor.name));
}

// Creates the dataset of one tensor and returns its slot (length 0 for an empty tensor).
TensorSlot create_tensor_dataset(std::string_view file_name, hid_t file, const FileTensor& entry,
                                 const Hdf5LayoutOptions& options, const PropertyLists& lists,
                                 hdf5::RecordedFile& recorded) {
    const plan::PlannedTensor& tensor = *entry.tensor;
    const std::uint64_t bytes = checked_output_bytes(file_name, tensor);
    ElementType element = element_type(tensor.output_dtype, options.bf16_as_float);
    if (H5Tget_size(element.type.get()) != dtype_size(tensor.output_dtype)) {
        throw_internal_error("HDF5 layout: element type of " + quote_name(tensor.name) +
                             " has the wrong size");
    }
    Handle space = tensor_dataspace(file_name, tensor);
    Handle dataset = checked(
        H5Dcreate2(file, tensor.name.c_str(), element.type.get(), space.get(),
                   lists.link_create.get(), lists.dataset_create.get(), hdf5::default_plist()),
        H5Dclose, "creating dataset " + quote_name(tensor.name));
    if (!element.dtype_attribute.empty()) {
        write_string_attribute(dataset.get(), "dtype", element.dtype_attribute);
    }

    TensorSlot slot{entry.index, 0, bytes};
    if (bytes > 0) {
        const haddr_t offset = H5Dget_offset(dataset.get());
        if (offset == hdf5::undefined_address()) {
            hdf5::throw_error("finding the data offset of " + quote_name(tensor.name));
        }
        if (H5Dget_storage_size(dataset.get()) != bytes) {
            throw_internal_error("HDF5 layout: dataset " + quote_name(tensor.name) + " got " +
                                 std::to_string(H5Dget_storage_size(dataset.get())) +
                                 " bytes of storage, expected " + std::to_string(bytes));
        }
        // From here on, HDF5 writing into this range is an error, and stale bytes there (from
        // freed metadata) are forgotten.
        recorded.reserve_raw(offset, bytes);
        slot.offset = offset;
    }
    dataset.close("closing dataset " + quote_name(tensor.name));
    return slot;
}

// ---------------------------------------------------------------------------------------------
// From the recorded file to the layout

// Turns everything outside the slots into fixed regions: recorded bytes, zeros where HDF5
// allocated space but wrote nothing. Checks the layout invariants on the way.
void fill_fixed_regions(OutputFileLayout& layout, const hdf5::RecordedFile& recorded) {
    std::sort(layout.slots.begin(), layout.slots.end(),
              [](const TensorSlot& a, const TensorSlot& b) { return a.offset < b.offset; });
    auto add_region = [&](std::uint64_t begin, std::uint64_t end) {
        if (begin >= end) {
            return;
        }
        const std::uint64_t length = end - begin;
        if (length - recorded.recorded_bytes_in(begin, length) > kMaxUnwrittenBytes) {
            throw_internal_error("HDF5 layout of " + layout.name + ": " + std::to_string(length) +
                                 " bytes at offset " + std::to_string(begin) +
                                 " were allocated but neither written nor a tensor slot");
        }
        FixedRegion region;
        region.offset = begin;
        region.bytes.resize(length);
        recorded.read(begin, region.bytes);
        layout.fixed.push_back(std::move(region));
    };

    std::uint64_t cursor = 0;
    for (const TensorSlot& slot : layout.slots) {
        if (slot.offset < cursor) {
            throw_internal_error("HDF5 layout of " + layout.name + ": tensor slots overlap at " +
                                 std::to_string(slot.offset));
        }
        if (recorded.recorded_bytes_in(slot.offset, slot.length) != 0) {
            throw_internal_error("HDF5 layout of " + layout.name +
                                 ": metadata was written inside a tensor slot at " +
                                 std::to_string(slot.offset));
        }
        add_region(cursor, slot.offset);
        cursor = slot.offset + slot.length;
    }
    if (cursor > layout.size) {
        throw_internal_error("HDF5 layout of " + layout.name + ": a tensor slot ends at " +
                             std::to_string(cursor) + ", beyond the file size " +
                             std::to_string(layout.size));
    }
    add_region(cursor, layout.size);
}

}  // namespace

OutputFileLayout layout_hdf5_file(std::string file_name, const plan::TensorPlan& plan,
                                  std::span<const std::uint32_t> tensor_indices,
                                  const Hdf5LayoutOptions& options) {
    const std::vector<FileTensor> tensors = file_tensors(file_name, plan, tensor_indices);
    check_names(file_name, tensors);

    OutputFileLayout layout;
    layout.name = std::move(file_name);
    layout.format = OutputFormat::kHdf5;

    hdf5::QuietErrors quiet;
    hdf5::RecordedFile recorded;  // outlives every HDF5 handle below
    try {
        PropertyLists lists = make_property_lists(recorded);
        Handle file = checked(H5Fcreate(layout.name.c_str(), hdf5::create_truncate_flag(),
                                        lists.file_create.get(), lists.file_access.get()),
                              H5Fclose, "creating " + quote_name(layout.name) + " in memory");
        const hid_t id = file.get();

        write_string_attribute(id, "format", "zero2fp32");
        write_string_attribute(id, "writer",
                               options.writer_version.empty()
                                   ? std::string("zero2fp32-mpi")
                                   : "zero2fp32-mpi " + options.writer_version);
        write_string_attribute(id, "source_checkpoint", options.source_checkpoint);
        write_names_dataset(id, tensors, lists);

        std::set<std::string> groups;
        for (const FileTensor& entry : tensors) {
            if (entry.link_target >= 0) {
                continue;
            }
            create_parent_groups(id, entry.tensor->name, lists, groups);
            TensorSlot slot =
                create_tensor_dataset(layout.name, id, entry, options, lists, recorded);
            if (slot.length > 0) {
                layout.slots.push_back(slot);
            }
        }
        for (const FileTensor& entry : tensors) {
            if (entry.link_target < 0) {
                continue;
            }
            create_parent_groups(id, entry.tensor->name, lists, groups);
            const std::string& target =
                plan.tensors[static_cast<std::size_t>(entry.link_target)].name;
            check(H5Lcreate_hard(id, target.c_str(), id, entry.tensor->name.c_str(),
                                 lists.link_create.get(), hdf5::default_plist()),
                  "linking alias " + quote_name(entry.tensor->name) + " to " + quote_name(target));
        }
        file.close("closing " + quote_name(layout.name) + " (writing its metadata)");
    } catch (const Error& error) {
        // Name the file in every message, and add the driver's reason when there is one (HDF5
        // itself only says "driver write request failed").
        std::string message = error.what();
        const std::string prefix = layout.name + ": ";
        if (!message.starts_with(prefix)) {
            message.insert(0, prefix);
        }
        if (!recorded.driver_error().empty()) {
            message += "; recording driver: " + recorded.driver_error();
        }
        throw Error(error.kind(), std::move(message));
    }
    if (!recorded.driver_error().empty()) {
        throw_internal_error("HDF5 layout of " + layout.name + ": " + recorded.driver_error());
    }

    // On close the library truncates the file to its end of allocation, as sec2 would.
    layout.size = recorded.eof();
    fill_fixed_regions(layout, recorded);
    return layout;
}

}  // namespace z2f::output

// The module's entry point (hdf5_module.hpp): what libzero2fp32 looks up after dlopen.
extern "C" __attribute__((visibility("default"))) z2f::output::Hdf5LayoutFunction
z2f_hdf5_layout_v1() {
    return &z2f::output::layout_hdf5_file;
}
