// Tests of the HDF5 layout: invariants, determinism, and files realised from a layout (fixed
// regions + tensor bytes written with pwrite) read back through the real HDF5 library.
#include "output/hdf5_layout.hpp"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <malloc.h>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include <gtest/gtest.h>
#include <sys/resource.h>

#include "common/errors.hpp"
#include "io/posix_file.hpp"
#include "output/hdf5_api.hpp"
#include "output/hdf5_module.hpp"

namespace z2f {
namespace {

namespace hdf5 = output::hdf5;

static_assert(std::endian::native == std::endian::little, "the tests build little-endian bytes");

using hdf5::check;
using hdf5::checked;
using hdf5::Handle;

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif
#else
constexpr bool kAddressSanitizer = false;
#endif

// ---------------------------------------------------------------------------------------------
// Plans and tensor values

plan::PlannedTensor tensor(std::string name, std::vector<std::uint64_t> shape, DType dtype) {
    plan::PlannedTensor t;
    t.name = std::move(name);
    t.shape = std::move(shape);
    t.source_dtype = dtype;
    t.output_dtype = dtype;
    return t;
}

plan::PlannedTensor alias(std::string name, const plan::TensorPlan& plan, std::int64_t owner) {
    plan::PlannedTensor t = plan.tensors[static_cast<std::size_t>(owner)];
    t.name = std::move(name);
    t.role = TensorRole::kAlias;
    t.alias_of = owner;
    t.extents.clear();
    return t;
}

// The sample plan. tests/python/check_hdf5_h5py.py knows the same tensors: keep them in sync.
plan::TensorPlan sample_plan() {
    plan::TensorPlan plan;
    auto& t = plan.tensors;
    t.push_back(tensor("embed.weight", {4, 3}, DType::kF32));              // 0
    t.push_back(tensor("scale", {}, DType::kF32));                         // 1
    t.push_back(tensor("empty", {0, 5}, DType::kF32));                     // 2
    t.push_back(tensor("enc/layer.0/attn.weight", {2, 3}, DType::kBF16));  // 3
    t.push_back(tensor("enc/layer.0/attn.bias", {3}, DType::kF16));        // 4
    t.push_back(tensor("step", {2}, DType::kI64));                         // 5
    t.push_back(tensor("mask", {5}, DType::kBool));                        // 6
    t.push_back(tensor("bytes", {3}, DType::kU8));                         // 7
    t.push_back(tensor("complex", {2}, DType::kC64));                      // 8
    t.push_back(tensor("fp8", {4}, DType::kF8E4M3));                       // 9
    t.push_back(tensor("counts", {3}, DType::kI32));                       // 10
    t.push_back(tensor("double", {2}, DType::kF64));                       // 11
    t.push_back(tensor("shorts", {2, 1}, DType::kI16));                    // 12
    t.push_back(tensor("big.unsigned", {2}, DType::kU64));                 // 13
    t.push_back(alias("lm_head.weight", plan, 0));                         // 14
    t.push_back(alias("enc/tied.bias", plan, 4));                          // 15
    return plan;
}

std::vector<std::uint32_t> all_indices(const plan::TensorPlan& plan) {
    std::vector<std::uint32_t> indices(plan.tensors.size());
    for (std::uint32_t i = 0; i < indices.size(); ++i) {
        indices[i] = i;
    }
    return indices;
}

output::Hdf5LayoutOptions sample_options(bool bf16_as_float = false) {
    output::Hdf5LayoutOptions options;
    options.writer_version = "0.1.0-test";
    options.source_checkpoint = "/ckpt/global_step2";
    options.bf16_as_float = bf16_as_float;
    return options;
}

// Element i of tensor t: simple formulas, exactly representable in every dtype used.
double float_value(std::size_t t, std::uint64_t i) {
    return static_cast<double>((i + t) % 64) * 0.125 - 2.0;
}
std::int64_t int_value(std::size_t t, std::uint64_t i) {
    return static_cast<std::int64_t>((i * 7 + t) % 251) - 125;
}
std::uint64_t uint_value(std::size_t t, std::uint64_t i) {
    return (i * 7 + t) % 251;
}
bool bool_value(std::size_t t, std::uint64_t i) {
    return (i + t) % 3 == 0;
}

// IEEE half bits of a float that is zero or a normal half (true for float_value).
std::uint16_t half_bits(float value) {
    const auto bits = std::bit_cast<std::uint32_t>(value);
    const auto sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
    if ((bits & 0x7FFFFFFFu) == 0) {
        return sign;
    }
    const auto exponent = static_cast<std::uint32_t>(((bits >> 23) & 0xFFu) - 127u + 15u);
    const auto mantissa = (bits >> 13) & 0x3FFu;
    return static_cast<std::uint16_t>(sign | (exponent << 10) | mantissa);
}

template <typename T>
void put(std::vector<std::byte>& out, std::uint64_t index, T value) {
    std::memcpy(out.data() + index * sizeof(T), &value, sizeof(T));
}

// The bytes of tensor t (its plan index) in its output dtype.
std::vector<std::byte> tensor_bytes(const plan::PlannedTensor& tensor, std::size_t t) {
    const std::uint64_t count = tensor.numel();
    std::vector<std::byte> out(tensor.output_bytes());
    for (std::uint64_t i = 0; i < count; ++i) {
        const double f = float_value(t, i);
        switch (tensor.output_dtype) {
            case DType::kF64:
                put(out, i, f);
                break;
            case DType::kF32:
                put(out, i, static_cast<float>(f));
                break;
            case DType::kF16:
                put(out, i, half_bits(static_cast<float>(f)));
                break;
            case DType::kBF16:
                put(out, i,
                    static_cast<std::uint16_t>(
                        std::bit_cast<std::uint32_t>(static_cast<float>(f)) >> 16));
                break;
            case DType::kI64:
                put(out, i, int_value(t, i));
                break;
            case DType::kI32:
                put(out, i, static_cast<std::int32_t>(int_value(t, i)));
                break;
            case DType::kI16:
                put(out, i, static_cast<std::int16_t>(int_value(t, i)));
                break;
            case DType::kI8:
                put(out, i, static_cast<std::int8_t>(int_value(t, i)));
                break;
            case DType::kU8:
            case DType::kF8E4M3:
            case DType::kF8E5M2:
                put(out, i, static_cast<std::uint8_t>(uint_value(t, i)));
                break;
            case DType::kU16:
                put(out, i, static_cast<std::uint16_t>(uint_value(t, i)));
                break;
            case DType::kU32:
                put(out, i, static_cast<std::uint32_t>(uint_value(t, i)));
                break;
            case DType::kU64:
                put(out, i, uint_value(t, i));
                break;
            case DType::kBool:
                put(out, i, static_cast<std::uint8_t>(bool_value(t, i) ? 1 : 0));
                break;
            case DType::kC64:
                put(out, 2 * i, static_cast<float>(f));
                put(out, 2 * i + 1, static_cast<float>(-f));
                break;
        }
    }
    return out;
}

// ---------------------------------------------------------------------------------------------
// Layout checks and realisation

// The OutputFileLayout invariants: slots ascending, regions and slots disjoint, inside
// [0, size), and together covering every byte of the file.
void expect_layout_invariants(const output::OutputFileLayout& layout,
                              const plan::TensorPlan& plan) {
    struct Piece {
        std::uint64_t offset;
        std::uint64_t length;
        bool slot;
    };
    std::vector<Piece> pieces;
    for (const output::FixedRegion& region : layout.fixed) {
        EXPECT_FALSE(region.bytes.empty());
        pieces.push_back({region.offset, region.bytes.size(), false});
    }
    for (std::size_t i = 0; i < layout.slots.size(); ++i) {
        const output::TensorSlot& slot = layout.slots[i];
        if (i > 0) {
            EXPECT_LT(layout.slots[i - 1].offset, slot.offset) << "slots are not ascending";
        }
        ASSERT_LT(slot.tensor, plan.tensors.size());
        EXPECT_EQ(slot.length, plan.tensors[slot.tensor].output_bytes());
        EXPECT_GT(slot.length, 0u);
        pieces.push_back({slot.offset, slot.length, true});
    }
    std::sort(pieces.begin(), pieces.end(),
              [](const Piece& a, const Piece& b) { return a.offset < b.offset; });
    std::uint64_t cursor = 0;
    for (const Piece& piece : pieces) {
        EXPECT_EQ(piece.offset, cursor)
            << (piece.offset < cursor ? "overlap" : "hole") << " at offset " << piece.offset;
        cursor = std::max(cursor, piece.offset + piece.length);
    }
    EXPECT_EQ(cursor, layout.size);
    EXPECT_EQ(layout.format, OutputFormat::kHdf5);
}

struct TempDir {
    std::filesystem::path path;
    TempDir() {
        std::string pattern =
            (std::filesystem::temp_directory_path() / "z2f_hdf5_test_XXXXXX").string();
        if (::mkdtemp(pattern.data()) == nullptr) {
            throw std::runtime_error("mkdtemp failed");
        }
        path = pattern;
    }
    ~TempDir() {
        std::error_code ignored;
        std::filesystem::remove_all(path, ignored);
    }
};

// Writes the fixed regions and, if asked, every slot's tensor bytes; the file gets the layout's
// size (slots left unwritten become holes).
void realise(const output::OutputFileLayout& layout, const plan::TensorPlan& plan,
             const std::string& path, bool write_tensors) {
    io::File file = io::File::create_truncate(path);
    for (const output::FixedRegion& region : layout.fixed) {
        file.write_all(region.offset, region.bytes);
    }
    if (write_tensors) {
        for (const output::TensorSlot& slot : layout.slots) {
            const std::vector<std::byte> bytes =
                tensor_bytes(plan.tensors[slot.tensor], slot.tensor);
            ASSERT_EQ(bytes.size(), slot.length);
            file.write_all(slot.offset, bytes);
        }
    }
    file.truncate(layout.size);
    file.close();
}

// ---------------------------------------------------------------------------------------------
// Reading back with HDF5 (sec2 driver)

Handle open_file(const std::string& path) {
    return checked(H5Fopen(path.c_str(), hdf5::read_only_flag(), hdf5::default_plist()), H5Fclose,
                   "opening " + path);
}

Handle open_dataset(hid_t file, const std::string& name) {
    return checked(H5Dopen2(file, name.c_str(), hdf5::default_plist()), H5Dclose,
                   "opening dataset " + name);
}

std::string read_string_attribute(hid_t object, const char* name) {
    Handle attribute = checked(H5Aopen(object, name, hdf5::default_plist()), H5Aclose, name);
    Handle type = checked(H5Aget_type(attribute.get()), H5Tclose, "attribute type");
    EXPECT_EQ(H5Tget_class(type.get()), H5T_STRING);
    EXPECT_EQ(H5Tis_variable_str(type.get()), 0);
    EXPECT_EQ(H5Tget_cset(type.get()), H5T_CSET_UTF8);
    std::vector<char> bytes(H5Tget_size(type.get()));
    check(H5Aread(attribute.get(), type.get(), bytes.data()), "reading attribute");
    std::string value(bytes.begin(), bytes.end());
    value.erase(std::find(value.begin(), value.end(), '\0'), value.end());
    return value;
}

std::vector<std::string> read_names(hid_t file) {
    Handle dataset = open_dataset(file, std::string(output::kHdf5NamesDataset));
    Handle type = checked(H5Dget_type(dataset.get()), H5Tclose, "names type");
    Handle space = checked(H5Dget_space(dataset.get()), H5Sclose, "names space");
    const auto count = static_cast<std::size_t>(H5Sget_simple_extent_npoints(space.get()));
    const std::size_t width = H5Tget_size(type.get());
    std::vector<char> bytes(count * width);
    if (count > 0) {
        check(H5Dread(dataset.get(), type.get(), hdf5::all_selection(), hdf5::all_selection(),
                      hdf5::default_plist(), bytes.data()),
              "reading names");
    }
    std::vector<std::string> names;
    for (std::size_t i = 0; i < count; ++i) {
        std::string name(bytes.data() + i * width, width);
        name.erase(std::find(name.begin(), name.end(), '\0'), name.end());
        names.push_back(std::move(name));
    }
    return names;
}

std::vector<std::uint64_t> dataset_shape(hid_t dataset) {
    Handle space = checked(H5Dget_space(dataset), H5Sclose, "dataset space");
    const int rank = H5Sget_simple_extent_ndims(space.get());
    std::vector<hsize_t> dims(static_cast<std::size_t>(std::max(rank, 0)));
    H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
    if (rank == 0) {
        EXPECT_EQ(H5Sget_simple_extent_type(space.get()), H5S_SCALAR);
    }
    return {dims.begin(), dims.end()};
}

bool type_equals(hid_t a, hid_t b) {
    return hdf5::check_tri(H5Tequal(a, b), "comparing types");
}

// Checks the HDF5 datatype of a tensor dataset against the documented mapping.
void expect_element_type(hid_t type, DType dtype, bool bf16_as_float) {
    switch (dtype) {
        case DType::kF64:
            EXPECT_TRUE(type_equals(type, H5T_IEEE_F64LE));
            break;
        case DType::kF32:
            EXPECT_TRUE(type_equals(type, H5T_IEEE_F32LE));
            break;
        case DType::kF16:
        case DType::kBF16: {
            if (dtype == DType::kBF16 && !bf16_as_float) {
                EXPECT_TRUE(type_equals(type, H5T_STD_U16LE));
                break;
            }
            ASSERT_EQ(H5Tget_class(type), H5T_FLOAT);
            EXPECT_EQ(H5Tget_size(type), 2u);
            EXPECT_EQ(H5Tget_order(type), H5T_ORDER_LE);
            std::size_t sign = 0, exponent_pos = 0, exponent_size = 0, mantissa_pos = 0,
                        mantissa_size = 0;
            check(H5Tget_fields(type, &sign, &exponent_pos, &exponent_size, &mantissa_pos,
                                &mantissa_size),
                  "float fields");
            EXPECT_EQ(sign, 15u);
            EXPECT_EQ(mantissa_pos, 0u);
            if (dtype == DType::kF16) {
                EXPECT_EQ(exponent_pos, 10u);
                EXPECT_EQ(exponent_size, 5u);
                EXPECT_EQ(mantissa_size, 10u);
                EXPECT_EQ(H5Tget_ebias(type), 15u);
            } else {
                EXPECT_EQ(exponent_pos, 7u);
                EXPECT_EQ(exponent_size, 8u);
                EXPECT_EQ(mantissa_size, 7u);
                EXPECT_EQ(H5Tget_ebias(type), 127u);
            }
            break;
        }
        case DType::kI64:
            EXPECT_TRUE(type_equals(type, H5T_STD_I64LE));
            break;
        case DType::kI32:
            EXPECT_TRUE(type_equals(type, H5T_STD_I32LE));
            break;
        case DType::kI16:
            EXPECT_TRUE(type_equals(type, H5T_STD_I16LE));
            break;
        case DType::kI8:
            EXPECT_TRUE(type_equals(type, H5T_STD_I8LE));
            break;
        case DType::kU8:
        case DType::kF8E4M3:
        case DType::kF8E5M2:
            EXPECT_TRUE(type_equals(type, H5T_STD_U8LE));
            break;
        case DType::kU16:
            EXPECT_TRUE(type_equals(type, H5T_STD_U16LE));
            break;
        case DType::kU32:
            EXPECT_TRUE(type_equals(type, H5T_STD_U32LE));
            break;
        case DType::kU64:
            EXPECT_TRUE(type_equals(type, H5T_STD_U64LE));
            break;
        case DType::kBool: {
            ASSERT_EQ(H5Tget_class(type), H5T_ENUM);
            Handle super = checked(H5Tget_super(type), H5Tclose, "enum base");
            EXPECT_TRUE(type_equals(super.get(), H5T_STD_I8LE));
            ASSERT_EQ(H5Tget_nmembers(type), 2);
            for (unsigned member = 0; member < 2; ++member) {
                char* name = H5Tget_member_name(type, member);
                std::int8_t value = -1;
                check(H5Tget_member_value(type, member, &value), "enum value");
                EXPECT_STREQ(name, member == 0 ? "FALSE" : "TRUE");
                EXPECT_EQ(value, member == 0 ? 0 : 1);
                H5free_memory(name);
            }
            break;
        }
        case DType::kC64: {
            ASSERT_EQ(H5Tget_class(type), H5T_COMPOUND);
            EXPECT_EQ(H5Tget_size(type), 8u);
            ASSERT_EQ(H5Tget_nmembers(type), 2);
            for (unsigned member = 0; member < 2; ++member) {
                char* name = H5Tget_member_name(type, member);
                EXPECT_STREQ(name, member == 0 ? "r" : "i");
                H5free_memory(name);
                EXPECT_EQ(H5Tget_member_offset(type, member), member * 4u);
                Handle part = checked(H5Tget_member_type(type, member), H5Tclose, "member");
                EXPECT_TRUE(type_equals(part.get(), H5T_IEEE_F32LE));
            }
            break;
        }
    }
}

std::vector<std::byte> read_raw(hid_t dataset, std::uint64_t bytes) {
    Handle type = checked(H5Dget_type(dataset), H5Tclose, "dataset type");
    std::vector<std::byte> out(bytes);
    if (bytes > 0) {
        check(H5Dread(dataset, type.get(), hdf5::all_selection(), hdf5::all_selection(),
                      hdf5::default_plist(), out.data()),
              "reading dataset");
    }
    return out;
}

// Opens the realised file with the default (sec2) driver and checks everything in it.
void expect_file_matches_plan(const std::string& path, const plan::TensorPlan& plan,
                              const std::vector<std::uint32_t>& indices,
                              const output::Hdf5LayoutOptions& options) {
    hdf5::QuietErrors quiet;
    Handle file = open_file(path);
    const hid_t id = file.get();
    EXPECT_EQ(read_string_attribute(id, "format"), "zero2fp32");
    EXPECT_EQ(read_string_attribute(id, "writer"), "zero2fp32-mpi " + options.writer_version);
    EXPECT_EQ(read_string_attribute(id, "source_checkpoint"), options.source_checkpoint);

    std::vector<std::uint32_t> sorted = indices;
    std::sort(sorted.begin(), sorted.end());
    std::vector<std::string> expected_names;
    for (std::uint32_t index : sorted) {
        expected_names.push_back(plan.tensors[index].name);
    }
    EXPECT_EQ(read_names(id), expected_names);

    for (std::uint32_t index : sorted) {
        const plan::PlannedTensor& tensor = plan.tensors[index];
        SCOPED_TRACE(tensor.name);
        Handle dataset = open_dataset(id, tensor.name);
        EXPECT_EQ(dataset_shape(dataset.get()), tensor.shape);
        Handle type = checked(H5Dget_type(dataset.get()), H5Tclose, "dataset type");
        expect_element_type(type.get(), tensor.output_dtype, options.bf16_as_float);

        const bool raw_bits = (tensor.output_dtype == DType::kBF16 && !options.bf16_as_float) ||
                              tensor.output_dtype == DType::kF8E4M3 ||
                              tensor.output_dtype == DType::kF8E5M2;
        EXPECT_EQ(H5Aexists(dataset.get(), "dtype"), raw_bits ? 1 : 0);
        if (raw_bits) {
            EXPECT_EQ(read_string_attribute(dataset.get(), "dtype"),
                      torch_dtype_name(tensor.output_dtype));
        }

        // Values: an alias reads its owner's bytes, through the same object.
        const bool linked =
            tensor.alias_of >= 0 && std::binary_search(sorted.begin(), sorted.end(),
                                                       static_cast<std::uint32_t>(tensor.alias_of));
        const std::size_t value_source =
            linked ? static_cast<std::size_t>(tensor.alias_of) : static_cast<std::size_t>(index);
        EXPECT_EQ(read_raw(dataset.get(), tensor.output_bytes()),
                  tensor_bytes(tensor, value_source));

        H5L_info_t link{};
        check(H5Lget_info(id, tensor.name.c_str(), &link, hdf5::default_plist()), "link info");
        EXPECT_EQ(link.type, H5L_TYPE_HARD);
        if (linked) {
            Handle owner = open_dataset(id, plan.tensors[value_source].name);
            EXPECT_EQ(H5Dget_offset(dataset.get()), H5Dget_offset(owner.get()));
        }

        // Contiguous, no filters.
        Handle dcpl = checked(H5Dget_create_plist(dataset.get()), H5Pclose, "dcpl");
        EXPECT_EQ(H5Pget_layout(dcpl.get()), H5D_CONTIGUOUS);
        EXPECT_EQ(H5Pget_nfilters(dcpl.get()), 0);
    }
}

// ---------------------------------------------------------------------------------------------
// Tests

TEST(Hdf5Layout, RegionsAndSlotsTileTheFile) {
    const plan::TensorPlan plan = sample_plan();
    const std::vector<std::uint32_t> indices = all_indices(plan);
    const output::OutputFileLayout layout =
        output::layout_hdf5_file("model.h5", plan, indices, sample_options());
    EXPECT_EQ(layout.name, "model.h5");
    EXPECT_FALSE(layout.has_crc_tail());
    EXPECT_TRUE(layout.zip_entries.empty());
    expect_layout_invariants(layout, plan);

    // Every tensor with bytes has a slot; the empty tensor and the linked aliases have none.
    std::vector<std::uint32_t> slotted;
    for (const output::TensorSlot& slot : layout.slots) {
        slotted.push_back(slot.tensor);
    }
    std::sort(slotted.begin(), slotted.end());
    const std::vector<std::uint32_t> expected{0, 1, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13};
    EXPECT_EQ(slotted, expected);
    // The superblock signature starts the file.
    ASSERT_FALSE(layout.fixed.empty());
    ASSERT_EQ(layout.fixed.front().offset, 0u);
    const char signature[] = "\x89HDF\r\n\x1a\n";
    EXPECT_EQ(std::memcmp(layout.fixed.front().bytes.data(), signature, 8), 0);
}

TEST(Hdf5Layout, SameInputsGiveIdenticalBytes) {
    const plan::TensorPlan plan = sample_plan();
    const std::vector<std::uint32_t> indices = all_indices(plan);
    // Different malloc perturbation bytes: uninitialised heap memory reaching the file would
    // differ between the two layouts (glibc only; a no-op under ASan). A second boundary between
    // the two runs would show any timestamp.
    mallopt(M_PERTURB, 0x5A);
    const output::OutputFileLayout first =
        output::layout_hdf5_file("a.h5", plan, indices, sample_options());
    const auto now = std::chrono::system_clock::now();
    std::this_thread::sleep_until(std::chrono::ceil<std::chrono::seconds>(now) +
                                  std::chrono::milliseconds(50));
    mallopt(M_PERTURB, 0xA5);
    const output::OutputFileLayout second =
        output::layout_hdf5_file("a.h5", plan, indices, sample_options());
    mallopt(M_PERTURB, 0);

    EXPECT_EQ(first.size, second.size);
    ASSERT_EQ(first.fixed.size(), second.fixed.size());
    for (std::size_t i = 0; i < first.fixed.size(); ++i) {
        EXPECT_EQ(first.fixed[i].offset, second.fixed[i].offset);
        EXPECT_TRUE(first.fixed[i].bytes == second.fixed[i].bytes) << "region " << i;
    }
    ASSERT_EQ(first.slots.size(), second.slots.size());
    for (std::size_t i = 0; i < first.slots.size(); ++i) {
        EXPECT_EQ(first.slots[i].tensor, second.slots[i].tensor);
        EXPECT_EQ(first.slots[i].offset, second.slots[i].offset);
        EXPECT_EQ(first.slots[i].length, second.slots[i].length);
    }
    // The index order given by the caller does not matter either.
    std::vector<std::uint32_t> reversed(indices.rbegin(), indices.rend());
    const output::OutputFileLayout third =
        output::layout_hdf5_file("a.h5", plan, reversed, sample_options());
    EXPECT_EQ(third.size, first.size);
    ASSERT_EQ(third.fixed.size(), first.fixed.size());
    for (std::size_t i = 0; i < first.fixed.size(); ++i) {
        EXPECT_TRUE(first.fixed[i].bytes == third.fixed[i].bytes) << "region " << i;
    }
}

TEST(Hdf5Layout, RealisedFileReadsBackThroughHdf5) {
    const plan::TensorPlan plan = sample_plan();
    const std::vector<std::uint32_t> indices = all_indices(plan);
    const output::Hdf5LayoutOptions options = sample_options();
    const output::OutputFileLayout layout =
        output::layout_hdf5_file("model.h5", plan, indices, options);
    TempDir dir;
    const std::string path = (dir.path / "model.h5").string();
    realise(layout, plan, path, true);
    EXPECT_EQ(io::file_size(path), layout.size);
    expect_file_matches_plan(path, plan, indices, options);

    // Nested names made real groups.
    hdf5::QuietErrors quiet;
    Handle file = open_file(path);
    Handle group = checked(H5Gopen2(file.get(), "enc/layer.0", hdf5::default_plist()), H5Gclose,
                           "opening group enc/layer.0");
    EXPECT_TRUE(group.valid());
}

TEST(Hdf5Layout, Bf16AsFloatConvertsExactlyToFloat) {
    const plan::TensorPlan plan = sample_plan();
    const std::vector<std::uint32_t> indices = all_indices(plan);
    const output::Hdf5LayoutOptions options = sample_options(true);
    const output::OutputFileLayout layout =
        output::layout_hdf5_file("model.h5", plan, indices, options);
    expect_layout_invariants(layout, plan);
    TempDir dir;
    const std::string path = (dir.path / "model.h5").string();
    realise(layout, plan, path, true);
    expect_file_matches_plan(path, plan, indices, options);

    // HDF5's own conversion of the 16-bit types to float gives the values back exactly.
    hdf5::QuietErrors quiet;
    Handle file = open_file(path);
    for (std::uint32_t index : {3u, 4u}) {
        const plan::PlannedTensor& tensor = plan.tensors[index];
        Handle dataset = open_dataset(file.get(), tensor.name);
        std::vector<float> values(tensor.numel());
        check(H5Dread(dataset.get(), H5T_NATIVE_FLOAT, hdf5::all_selection(), hdf5::all_selection(),
                      hdf5::default_plist(), values.data()),
              "reading as float");
        for (std::size_t i = 0; i < values.size(); ++i) {
            EXPECT_EQ(values[i], static_cast<float>(float_value(index, i))) << tensor.name << i;
        }
    }
}

TEST(Hdf5Layout, SubsetOfPlanAndAliasWithoutOwnerInFile) {
    const plan::TensorPlan plan = sample_plan();
    // lm_head.weight (14) without its owner (0): an ordinary dataset with its own slot.
    const std::vector<std::uint32_t> indices{14, 5, 1};
    const output::Hdf5LayoutOptions options = sample_options();
    const output::OutputFileLayout layout =
        output::layout_hdf5_file("part.h5", plan, indices, options);
    expect_layout_invariants(layout, plan);
    ASSERT_EQ(layout.slots.size(), 3u);
    TempDir dir;
    const std::string path = (dir.path / "part.h5").string();
    realise(layout, plan, path, true);

    hdf5::QuietErrors quiet;
    Handle file = open_file(path);
    EXPECT_EQ(read_names(file.get()),
              (std::vector<std::string>{"scale", "step", "lm_head.weight"}));
    Handle dataset = open_dataset(file.get(), "lm_head.weight");
    EXPECT_EQ(read_raw(dataset.get(), plan.tensors[14].output_bytes()),
              tensor_bytes(plan.tensors[14], 14));
}

TEST(Hdf5Layout, EmptyFileIsValid) {
    const plan::TensorPlan plan = sample_plan();
    const output::OutputFileLayout layout =
        output::layout_hdf5_file("none.h5", plan, {}, sample_options());
    expect_layout_invariants(layout, plan);
    EXPECT_TRUE(layout.slots.empty());
    TempDir dir;
    const std::string path = (dir.path / "none.h5").string();
    realise(layout, plan, path, true);
    hdf5::QuietErrors quiet;
    Handle file = open_file(path);
    EXPECT_TRUE(read_names(file.get()).empty());
}

TEST(Hdf5Layout, NamesThatAreNotHdf5PathsAreRefused) {
    auto layout_of = [](std::vector<std::string> names) {
        plan::TensorPlan plan;
        for (auto& name : names) {
            plan.tensors.push_back(tensor(std::move(name), {2}, DType::kF32));
        }
        return output::layout_hdf5_file("bad.h5", plan, all_indices(plan), sample_options());
    };
    auto expect_unsupported = [&](std::vector<std::string> names, std::string_view fragment) {
        try {
            layout_of(std::move(names));
            ADD_FAILURE() << "no error for " << fragment;
        } catch (const Error& error) {
            EXPECT_EQ(error.kind(), ErrorKind::kUnsupported) << error.what();
            EXPECT_NE(std::string(error.what()).find(fragment), std::string::npos) << error.what();
            EXPECT_NE(std::string(error.what()).find("bad.h5"), std::string::npos);
        }
    };
    expect_unsupported({""}, "empty");
    expect_unsupported({"/abs"}, "empty");
    expect_unsupported({"a//b"}, "empty");
    expect_unsupported({"a/"}, "empty");
    expect_unsupported({"a/./b"}, "'.'");
    expect_unsupported({"a/.."}, "'.'");
    expect_unsupported({"a", "a/b"}, "is a tensor, not a group");
    expect_unsupported({"a/b", "a"}, "uses it as a group");
    expect_unsupported({"x", "x"}, "used twice");
    expect_unsupported({std::string(output::kHdf5NamesDataset)}, "reserved");
    EXPECT_NO_THROW(layout_of({"x/__names__", "a.b", "a/b.c", "a/d"}));
}

TEST(Hdf5Layout, Utf8NamesBecomeUtf8Links) {
    plan::TensorPlan plan;
    const std::string name = "couche/poids.\xC3\xA9t\xC3\xA9";  // "couche/poids.été"
    plan.tensors.push_back(tensor(name, {2}, DType::kF32));
    const output::OutputFileLayout layout =
        output::layout_hdf5_file("utf8.h5", plan, all_indices(plan), sample_options());
    TempDir dir;
    const std::string path = (dir.path / "utf8.h5").string();
    realise(layout, plan, path, true);
    expect_file_matches_plan(path, plan, all_indices(plan), sample_options());
    hdf5::QuietErrors quiet;
    Handle file = open_file(path);
    H5L_info_t link{};
    check(H5Lget_info(file.get(), name.c_str(), &link, hdf5::default_plist()), "link info");
    EXPECT_EQ(link.cset, H5T_CSET_UTF8);
}

TEST(Hdf5Layout, FailuresMidwayLeaveNoOpenHdf5Objects) {
    auto layout_with = [](std::vector<std::uint64_t> shape) {
        plan::TensorPlan plan;
        plan.tensors.push_back(tensor("fine", {2}, DType::kF32));
        plan.tensors.push_back(tensor("too.big", std::move(shape), DType::kF32));
        return output::layout_hdf5_file("huge.h5", plan, all_indices(plan), sample_options());
    };
    // 2^64 bytes: refused before HDF5 sees it.
    try {
        layout_with({std::uint64_t{1} << 62});
        ADD_FAILURE() << "no error";
    } catch (const Error& error) {
        EXPECT_EQ(error.kind(), ErrorKind::kUnsupported) << error.what();
    }
    // 2^63 bytes: more than the driver's address space; HDF5 fails the allocation.
    try {
        layout_with({std::uint64_t{1} << 61});
        ADD_FAILURE() << "no error";
    } catch (const Error& error) {
        EXPECT_EQ(error.kind(), ErrorKind::kInternal) << error.what();
        const std::string message = error.what();
        EXPECT_EQ(message.rfind("huge.h5: HDF5: creating dataset 'too.big'", 0), 0u) << message;
    }
    EXPECT_EQ(H5Fget_obj_count(static_cast<hid_t>(H5F_OBJ_ALL), H5F_OBJ_ALL), 0);
    const plan::TensorPlan plan = sample_plan();
    const output::OutputFileLayout layout =
        output::layout_hdf5_file("after.h5", plan, all_indices(plan), sample_options());
    expect_layout_invariants(layout, plan);
}

TEST(Hdf5Layout, BadIndicesAreInternalErrors) {
    const plan::TensorPlan plan = sample_plan();
    const std::vector<std::uint32_t> duplicate{1, 1};
    EXPECT_THROW(output::layout_hdf5_file("x.h5", plan, duplicate, sample_options()), Error);
    const std::vector<std::uint32_t> outside{99};
    EXPECT_THROW(output::layout_hdf5_file("x.h5", plan, outside, sample_options()), Error);
}

std::uint64_t peak_rss_bytes() {
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    return static_cast<std::uint64_t>(usage.ru_maxrss) * 1024;  // ru_maxrss is in KiB on Linux
}

TEST(Hdf5Layout, ManyTensorsAndAHugeOneNeedNoBigMemory) {
    constexpr std::uint32_t kTensors = 5000;
    plan::TensorPlan plan;
    plan.tensors.reserve(kTensors + 1);
    for (std::uint32_t i = 0; i < kTensors; ++i) {
        plan.tensors.push_back(tensor("model.layers." + std::to_string(i / 10) + ".block." +
                                          std::to_string(i % 10) + ".weight",
                                      {16, 8}, i % 2 == 0 ? DType::kF32 : DType::kBF16));
    }
    // ~5 GB of declared data: 5 * 2^30 bytes of fp32.
    plan.tensors.push_back(tensor("huge.weight", {1280, 1024, 1024}, DType::kF32));
    const std::uint64_t huge_bytes = plan.tensors.back().output_bytes();
    ASSERT_EQ(huge_bytes, std::uint64_t{5} << 30);

    const auto indices = all_indices(plan);
    const auto started = std::chrono::steady_clock::now();
    const output::OutputFileLayout layout =
        output::layout_hdf5_file("big.h5", plan, indices, sample_options());
    const auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started);
    expect_layout_invariants(layout, plan);
    EXPECT_EQ(layout.slots.size(), kTensors + 1);
    EXPECT_GT(layout.size, huge_bytes);
    std::uint64_t fixed_bytes = 0;
    for (const output::FixedRegion& region : layout.fixed) {
        fixed_bytes += region.bytes.size();
    }
    EXPECT_LT(fixed_bytes, std::uint64_t{16} << 20) << "metadata should be a few MiB";

    // A few hundred MiB of RSS at most, whatever the declared size (ASan's shadow memory and
    // quarantine take their share).
    const std::uint64_t limit = (kAddressSanitizer ? 1024 : 256) * (std::uint64_t{1} << 20);
    EXPECT_LT(peak_rss_bytes(), limit);
    RecordProperty("layout_seconds", std::to_string(seconds.count()));

    // The realised file (tensor bytes left as holes, so it is sparse) opens with HDF5.
    TempDir dir;
    const std::string path = (dir.path / "big.h5").string();
    realise(layout, plan, path, false);
    hdf5::QuietErrors quiet;
    Handle file = open_file(path);
    const std::vector<std::string> names = read_names(file.get());
    ASSERT_EQ(names.size(), plan.tensors.size());
    EXPECT_EQ(names.front(), plan.tensors.front().name);
    EXPECT_EQ(names.back(), "huge.weight");
    Handle huge = open_dataset(file.get(), "huge.weight");
    EXPECT_EQ(dataset_shape(huge.get()), plan.tensors.back().shape);
    const auto huge_slot =
        std::find_if(layout.slots.begin(), layout.slots.end(),
                     [&](const output::TensorSlot& s) { return s.tensor == kTensors; });
    ASSERT_NE(huge_slot, layout.slots.end());
    EXPECT_EQ(H5Dget_offset(huge.get()), huge_slot->offset);
    Handle some = open_dataset(file.get(), plan.tensors[4321].name);
    EXPECT_EQ(dataset_shape(some.get()), plan.tensors[4321].shape);
}

// Writes the sample files for tests/python/check_hdf5_h5py.py into $Z2F_HDF5_SAMPLE_DIR (CTest
// sets it for the fixture); without it, into a temporary directory that is removed.
TEST(Hdf5Layout, WriteSampleFilesForH5py) {
    const char* target = std::getenv("Z2F_HDF5_SAMPLE_DIR");
    TempDir temporary;
    const std::filesystem::path dir = target != nullptr ? target : temporary.path;
    std::filesystem::create_directories(dir);
    const plan::TensorPlan plan = sample_plan();
    const std::vector<std::uint32_t> indices = all_indices(plan);
    for (bool bf16_as_float : {false, true}) {
        const output::Hdf5LayoutOptions options = sample_options(bf16_as_float);
        const std::string name = bf16_as_float ? "sample_bf16_float.h5" : "sample.h5";
        const output::OutputFileLayout layout =
            output::layout_hdf5_file(name, plan, indices, options);
        realise(layout, plan, (dir / name).string(), true);
        expect_file_matches_plan((dir / name).string(), plan, indices, options);
    }
}

TEST(Hdf5Module, TheLibraryLoadsTheWriterFromItsOwnDirectory) {
    // libzero2fp32 never links HDF5: output_plan reaches layout_hdf5_file through the module
    // it loads from its own directory. Here the test binary has the module loaded already, so
    // the loader must hand back that very function.
    const output::Hdf5LayoutFunction loaded = output::hdf5_layout_function();
    EXPECT_EQ(loaded, &output::layout_hdf5_file);
    EXPECT_EQ(output::hdf5_layout_function(), loaded);  // loaded once
}

}  // namespace
}  // namespace z2f
