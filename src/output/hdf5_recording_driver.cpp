#include "output/hdf5_recording_driver.hpp"

// HDF5 1.13 moved the driver class structure out of the public header into a "developer"
// header, and gave it a version number and a driver value.
#if H5_VERSION_GE(1, 13, 0)
#include <H5FDdevelop.h>
#endif

#include <algorithm>
#include <cstring>
#include <exception>
#include <functional>
#include <iterator>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>

#include "common/errors.hpp"
#include "output/hdf5_api.hpp"

namespace z2f::output::hdf5 {
namespace {

std::uint64_t checked_end(std::uint64_t offset, std::uint64_t length) {
    std::uint64_t end = 0;
    if (__builtin_add_overflow(offset, length, &end)) {
        throw_internal_error("recorded HDF5 file: byte range at " + std::to_string(offset) +
                             " of length " + std::to_string(length) +
                             " overflows the address space");
    }
    return end;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// RecordedFile

void RecordedFile::write(std::uint64_t offset, std::span<const std::byte> bytes) {
    if (bytes.empty()) {
        return;
    }
    const std::uint64_t end = checked_end(offset, bytes.size());

    // A reserved range overlapping [offset, end) starts before `end` and ends after `offset`.
    auto reserved = reserved_.lower_bound(end);
    if (reserved != reserved_.begin() && std::prev(reserved)->second > offset) {
        --reserved;
        throw_internal_error("HDF5 wrote " + std::to_string(bytes.size()) + " bytes at offset " +
                             std::to_string(offset) + " into the data of a tensor dataset [" +
                             std::to_string(reserved->first) + ", " +
                             std::to_string(reserved->second) + ")");
    }

    // First recorded range that ends after `offset`.
    auto first = ranges_.upper_bound(offset);
    if (first != ranges_.begin()) {
        auto before = std::prev(first);
        if (before->first + before->second.size() > offset) {
            first = before;
        }
    }
    if (first == ranges_.end() || first->first >= end) {
        ranges_.emplace(offset, std::vector<std::byte>(bytes.begin(), bytes.end()));
        recorded_bytes_ += bytes.size();
    } else if (first->first <= offset && first->first + first->second.size() >= end) {
        // A rewrite inside one recorded range: the common case (metadata flushed again).
        std::memcpy(first->second.data() + (offset - first->first), bytes.data(), bytes.size());
    } else {
        auto last = first;
        while (std::next(last) != ranges_.end() && std::next(last)->first < end) {
            ++last;
        }
        const std::uint64_t merged_begin = std::min(offset, first->first);
        const std::uint64_t merged_end = std::max(end, last->first + last->second.size());
        std::vector<std::byte> merged(merged_end - merged_begin);
        auto stop = std::next(last);
        for (auto it = first; it != stop; ++it) {
            std::memcpy(merged.data() + (it->first - merged_begin), it->second.data(),
                        it->second.size());
            recorded_bytes_ -= it->second.size();
        }
        std::memcpy(merged.data() + (offset - merged_begin), bytes.data(), bytes.size());
        ranges_.erase(first, stop);
        recorded_bytes_ += merged.size();
        ranges_.emplace(merged_begin, std::move(merged));
    }
    eof_ = std::max(eof_, end);
}

void RecordedFile::read(std::uint64_t offset, std::span<std::byte> out) const {
    std::fill(out.begin(), out.end(), std::byte{0});
    if (out.empty()) {
        return;
    }
    const std::uint64_t end = checked_end(offset, out.size());
    auto it = ranges_.upper_bound(offset);
    if (it != ranges_.begin()) {
        --it;
    }
    for (; it != ranges_.end() && it->first < end; ++it) {
        const std::uint64_t range_end = it->first + it->second.size();
        const std::uint64_t begin = std::max(offset, it->first);
        const std::uint64_t stop = std::min(end, range_end);
        if (begin < stop) {
            std::memcpy(out.data() + (begin - offset), it->second.data() + (begin - it->first),
                        stop - begin);
        }
    }
}

std::uint64_t RecordedFile::recorded_bytes_in(std::uint64_t offset, std::uint64_t length) const {
    const std::uint64_t end = checked_end(offset, length);
    std::uint64_t total = 0;
    auto it = ranges_.upper_bound(offset);
    if (it != ranges_.begin()) {
        --it;
    }
    for (; it != ranges_.end() && it->first < end; ++it) {
        const std::uint64_t begin = std::max(offset, it->first);
        const std::uint64_t stop = std::min<std::uint64_t>(end, it->first + it->second.size());
        if (begin < stop) {
            total += stop - begin;
        }
    }
    return total;
}

void RecordedFile::erase_range(std::uint64_t begin, std::uint64_t end) {
    if (begin >= end) {
        return;
    }
    auto it = ranges_.upper_bound(begin);
    if (it != ranges_.begin() && std::prev(it)->first + std::prev(it)->second.size() > begin) {
        --it;
    }
    std::vector<std::pair<std::uint64_t, std::vector<std::byte>>> kept;
    while (it != ranges_.end() && it->first < end) {
        const std::uint64_t start = it->first;
        const std::vector<std::byte>& data = it->second;
        const std::uint64_t stop = start + data.size();
        if (start < begin) {
            kept.emplace_back(
                start,
                std::vector<std::byte>(data.begin(),
                                       data.begin() + static_cast<std::ptrdiff_t>(begin - start)));
        }
        if (stop > end) {
            kept.emplace_back(
                end, std::vector<std::byte>(data.begin() + static_cast<std::ptrdiff_t>(end - start),
                                            data.end()));
        }
        recorded_bytes_ -= data.size();
        it = ranges_.erase(it);
    }
    for (auto& piece : kept) {
        recorded_bytes_ += piece.second.size();
        ranges_.emplace(piece.first, std::move(piece.second));
    }
}

void RecordedFile::reserve_raw(std::uint64_t offset, std::uint64_t length) {
    if (length == 0) {
        return;
    }
    const std::uint64_t end = checked_end(offset, length);
    auto next = reserved_.lower_bound(end);
    if (next != reserved_.begin() && std::prev(next)->second > offset) {
        throw_internal_error("HDF5 placed two datasets' data in overlapping ranges at offset " +
                             std::to_string(offset));
    }
    erase_range(offset, end);
    reserved_.emplace(offset, end);
}

void RecordedFile::truncate(std::uint64_t size) {
    erase_range(size, std::numeric_limits<std::uint64_t>::max());
    eof_ = size;
}

void RecordedFile::clear() noexcept {
    ranges_.clear();
    reserved_.clear();
    recorded_bytes_ = 0;
    eoa_ = 0;
    eof_ = 0;
    driver_error_.clear();
}

void RecordedFile::note_driver_error(std::string message) {
    if (driver_error_.empty()) {
        driver_error_ = std::move(message);
    }
}

// ---------------------------------------------------------------------------------------------
// The driver

namespace {

// What the file access property list carries. HDF5 copies it byte for byte (we give no
// fapl_copy callback), so it must stay trivially copyable.
struct DriverInfo {
    RecordedFile* file = nullptr;
};
static_assert(std::is_trivially_copyable_v<DriverInfo>);

// One open file. HDF5 only knows the leading H5FD_t (which it fills in after `open` returns);
// the rest is ours. Standard layout makes the H5FD_t* <-> OpenFile* conversion well defined.
struct OpenFile {
    H5FD_t pub;
    RecordedFile* file;
};
static_assert(std::is_standard_layout_v<OpenFile>);

RecordedFile& recorded(H5FD_t* handle) {
    return *reinterpret_cast<OpenFile*>(handle)->file;
}
const RecordedFile& recorded(const H5FD_t* handle) {
    return *reinterpret_cast<const OpenFile*>(handle)->file;
}

// Same bound as the sec2 driver: offsets must fit a signed 64-bit file offset.
constexpr haddr_t kMaxAddress = static_cast<haddr_t>(std::numeric_limits<std::int64_t>::max());

// Value identifying the driver class in HDF5 >= 1.13 (user drivers use 256..65535).
[[maybe_unused]] constexpr int kDriverValue = 0x5A2F;

H5FD_t* open_file(const char* /*name*/, unsigned flags, hid_t fapl, haddr_t /*maxaddr*/) {
    const void* raw = H5Pget_driver_info(fapl);
    if (raw == nullptr) {
        return nullptr;
    }
    DriverInfo info;
    std::memcpy(&info, raw, sizeof info);
    if (info.file == nullptr) {
        return nullptr;
    }
    try {
        auto* open = new OpenFile{};
        open->file = info.file;
        if ((flags & create_truncate_flag()) != 0) {
            info.file->clear();
        }
        return &open->pub;
    } catch (const std::exception& error) {
        info.file->note_driver_error(error.what());
        return nullptr;
    }
}

herr_t close_file(H5FD_t* handle) {
    delete reinterpret_cast<OpenFile*>(handle);
    return 0;
}

int compare_files(const H5FD_t* first, const H5FD_t* second) {
    const RecordedFile* a = &recorded(first);
    const RecordedFile* b = &recorded(second);
    if (a == b) {
        return 0;
    }
    return std::less<const RecordedFile*>{}(a, b) ? -1 : 1;
}

herr_t query_features(const H5FD_t* /*handle*/, unsigned long* flags) {
    // Like sec2: metadata and small raw data are carved out of aggregated blocks, so a file's
    // metadata clusters into a few regions instead of one per object.
    *flags = H5FD_FEAT_AGGREGATE_METADATA | H5FD_FEAT_AGGREGATE_SMALLDATA;
    return 0;
}

haddr_t get_eoa(const H5FD_t* handle, H5FD_mem_t /*type*/) {
    return recorded(handle).eoa();
}

herr_t set_eoa(H5FD_t* handle, H5FD_mem_t /*type*/, haddr_t address) {
    if (address > kMaxAddress) {
        recorded(handle).note_driver_error("HDF5 asked for an end of address beyond 2^63");
        return -1;
    }
    recorded(handle).set_eoa(address);
    return 0;
}

haddr_t get_eof(const H5FD_t* handle, H5FD_mem_t /*type*/) {
    return recorded(handle).eof();
}

herr_t read_bytes(H5FD_t* handle, H5FD_mem_t /*type*/, hid_t /*dxpl*/, haddr_t address, size_t size,
                  void* buffer) {
    RecordedFile& file = recorded(handle);
    try {
        file.read(address, std::span(static_cast<std::byte*>(buffer), size));
        return 0;
    } catch (const std::exception& error) {
        file.note_driver_error(error.what());
        return -1;
    }
}

herr_t write_bytes(H5FD_t* handle, H5FD_mem_t /*type*/, hid_t /*dxpl*/, haddr_t address,
                   size_t size, const void* buffer) {
    RecordedFile& file = recorded(handle);
    try {
        if (address > file.eoa() || size > file.eoa() - address) {
            throw_internal_error("HDF5 wrote " + std::to_string(size) + " bytes at offset " +
                                 std::to_string(address) + ", beyond the end of allocated space " +
                                 std::to_string(file.eoa()));
        }
        file.write(address, std::span(static_cast<const std::byte*>(buffer), size));
        return 0;
    } catch (const std::exception& error) {
        file.note_driver_error(error.what());
        return -1;
    }
}

herr_t truncate_file(H5FD_t* handle, hid_t /*dxpl*/, hbool_t /*closing*/) {
    RecordedFile& file = recorded(handle);
    try {
        file.truncate(file.eoa());  // what sec2 does with ftruncate: the file ends at the EOA
        return 0;
    } catch (const std::exception& error) {
        file.note_driver_error(error.what());
        return -1;
    }
}

H5FD_class_t make_driver_class() {
    // Every field is assigned by name on a zeroed structure, so the same code fits the 1.10 /
    // 1.12 layout and the 1.14 one (which adds version, value, vector and selection I/O, del and
    // ctl, all optional except version and value). Callbacks left null are optional.
    H5FD_class_t cls{};
#ifdef H5FD_CLASS_VERSION
    cls.version = H5FD_CLASS_VERSION;
    cls.value = static_cast<H5FD_class_value_t>(kDriverValue);
#endif
    cls.name = "z2f_recording";
    cls.maxaddr = kMaxAddress;
    cls.fc_degree = H5F_CLOSE_STRONG;
    cls.fapl_size = sizeof(DriverInfo);
    cls.open = open_file;
    cls.close = close_file;
    cls.cmp = compare_files;
    cls.query = query_features;
    cls.get_eoa = get_eoa;
    cls.set_eoa = set_eoa;
    cls.get_eof = get_eof;
    cls.read = read_bytes;
    cls.write = write_bytes;
    cls.truncate = truncate_file;
    // The "dichotomy" free-list map of sec2: space freed by metadata is only reused for metadata,
    // and raw data space only for raw data.
    for (int type = 0; type < static_cast<int>(H5FD_MEM_NTYPES); ++type) {
        const auto mem = static_cast<H5FD_mem_t>(type);
        cls.fl_map[type] =
            (mem == H5FD_MEM_DRAW || mem == H5FD_MEM_GHEAP) ? H5FD_MEM_DRAW : H5FD_MEM_SUPER;
    }
    return cls;
}

// Registers the driver on first use (and again if the library was closed and reopened).
hid_t recording_driver_id() {
    static const H5FD_class_t driver_class = make_driver_class();
    static hid_t id = H5I_INVALID_HID;
    if (id >= 0 && H5Iget_type(id) == H5I_VFL) {
        return id;
    }
    H5Eclear2(default_error_stack());
    id = H5FDregister(&driver_class);
    if (id < 0) {
        throw_error("registering the in-memory recording file driver");
    }
    return id;
}

}  // namespace

void use_recording_driver(hid_t fapl, RecordedFile& file) {
    DriverInfo info;
    info.file = &file;
    check(H5Pset_driver(fapl, recording_driver_id(), &info), "selecting the recording file driver");
}

}  // namespace z2f::output::hdf5
