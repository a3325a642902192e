#include "container/legacy_archive.hpp"

#include <algorithm>
#include <optional>

#include "common/bytes.hpp"
#include "common/checked_math.hpp"
#include "common/dtype.hpp"
#include "common/errors.hpp"
#include "pickle/machine.hpp"

namespace z2f::container {
namespace {

// Every message says which format it is about: a reader expecting a zip archive would have said
// something else about the same bytes.
constexpr std::string_view kFormat = "torch legacy (non-zip) format: ";

// The first window a pickle is looked for in; doubled until the pickle ends inside it.
constexpr std::uint64_t kFirstWindow = std::uint64_t{64} << 10;

constexpr std::int64_t kProtocolVersion = 1001;
// 0x1950a86a20f9469cfc6c, little-endian as LONG1 carries it, and in decimal as text LONG does.
constexpr std::string_view kMagicLittleEndian("\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19", 10);
constexpr std::string_view kMagicDecimal = "119547037146038801333356";

// Reads the file through one window of bytes, moved and grown on demand.
class Stream {
  public:
    Stream(const io::File& file, std::uint64_t size) : file_(file), size_(size) {}

    // The pickle starting at `offset`; `what` names it in messages.
    pickle::PicklePrefix pickle_at(std::uint64_t offset, const std::string& what,
                                   std::uint64_t max_bytes) {
        const std::string source = file_.path() + ": " + std::string(kFormat) + what +
                                   " (a pickle at byte " + std::to_string(offset) + ")";
        std::uint64_t want = kFirstWindow;
        while (true) {
            const std::uint64_t length = std::min({want, size_ - offset, max_bytes});
            std::optional<pickle::PicklePrefix> prefix =
                pickle::parse_pickle_prefix(window(offset, length), source);
            if (prefix)
                return std::move(*prefix);
            if (length == size_ - offset) {
                throw_input_error(file_.path(), std::string(kFormat) + "the file ends inside " +
                                                    what + ", which starts at byte " +
                                                    std::to_string(offset));
            }
            if (length == max_bytes) {
                throw_input_error(file_.path(), std::string(kFormat) + what + " at byte " +
                                                    std::to_string(offset) + " runs past " +
                                                    std::to_string(max_bytes) +
                                                    " bytes, the limit for a pickle");
            }
            want *= 2;
        }
    }

    // The little-endian i64 at `offset`, which must lie inside the file.
    std::int64_t i64_at(std::uint64_t offset, const std::string& what) {
        if (offset > size_ || size_ - offset < 8) {
            throw_input_error(file_.path(), std::string(kFormat) + "the file ends at byte " +
                                                std::to_string(size_) + ", before the count of " +
                                                what + " at byte " + std::to_string(offset));
        }
        // Counts of small storages lie close together: one read serves many of them.
        return static_cast<std::int64_t>(load_le<std::uint64_t>(
            window(offset, std::min<std::uint64_t>(kFirstWindow, size_ - offset)).data()));
    }

  private:
    // Bytes [offset, offset + length) of the file, from the window when it holds them.
    std::span<const std::byte> window(std::uint64_t offset, std::uint64_t length) {
        if (offset < start_ || offset - start_ + length > bytes_.size()) {
            bytes_.resize(static_cast<std::size_t>(length));
            file_.read_exact(offset, bytes_);
            start_ = offset;
        }
        return std::span<const std::byte>(bytes_).subspan(static_cast<std::size_t>(offset - start_),
                                                          static_cast<std::size_t>(length));
    }

    const io::File& file_;
    std::uint64_t size_;
    std::uint64_t start_ = 0;
    std::vector<std::byte> bytes_;
};

bool is_magic_number(const pickle::Value& value) {
    const auto* big = value.get<pickle::BigInt>();
    return big != nullptr && (big->le_bytes == kMagicLittleEndian || big->decimal == kMagicDecimal);
}

void check_sys_info(const std::string& path, const pickle::Value& value) {
    const auto* info = value.get<pickle::Dict>();
    if (info == nullptr) {
        throw_input_error(path, std::string(kFormat) + "the third pickle is " +
                                    pickle::describe_type(value) +
                                    ", expected the sys_info dict (protocol_version, "
                                    "little_endian, type_sizes)");
    }
    if (const pickle::Value* little = info->find("little_endian")) {
        if (!little->is_bool()) {
            throw_input_error(path, std::string(kFormat) + "sys_info['little_endian'] is " +
                                        pickle::describe_type(*little) + ", expected a bool");
        }
        if (!little->as_bool()) {
            throw_unsupported(path, std::string(kFormat) +
                                        "written on a big-endian machine (sys_info "
                                        "little_endian = False); only little-endian checkpoints "
                                        "are supported");
        }
    }
    if (const pickle::Value* version = info->find("protocol_version")) {
        if (!version->is_int() || version->as_int() != kProtocolVersion) {
            throw_input_error(path, std::string(kFormat) + "sys_info['protocol_version'] is " +
                                        (version->is_int() ? std::to_string(version->as_int())
                                                           : pickle::describe_type(*version)) +
                                        ", expected 1001");
        }
    }
}

}  // namespace

LegacyArchive LegacyArchive::open(const io::File& file, pickle::Document& document,
                                  std::uint64_t max_pickle_bytes) {
    LegacyArchive archive;
    archive.path_ = file.path();
    const std::string& path = archive.path_;
    archive.file_size_ = file.size();
    Stream stream(file, archive.file_size_);

    std::uint64_t offset = 0;
    pickle::PicklePrefix magic = stream.pickle_at(offset, "magic number", max_pickle_bytes);
    if (!is_magic_number(magic.document.root())) {
        throw_input_error(path, std::string(kFormat) + "the first pickle is " +
                                    pickle::describe_type(magic.document.root()) +
                                    ", expected the magic number 0x1950a86a20f9469cfc6c");
    }
    offset += magic.length;
    pickle::PicklePrefix version = stream.pickle_at(offset, "protocol version", max_pickle_bytes);
    const pickle::Value& number = version.document.root();
    if (!number.is_int() || number.as_int() != kProtocolVersion) {
        throw_input_error(path, std::string(kFormat) + "protocol version is " +
                                    (number.is_int() ? std::to_string(number.as_int())
                                                     : pickle::describe_type(number)) +
                                    ", expected 1001");
    }
    offset += version.length;
    pickle::PicklePrefix sys_info = stream.pickle_at(offset, "sys_info", max_pickle_bytes);
    check_sys_info(path, sys_info.document.root());
    offset += sys_info.length;

    pickle::PicklePrefix object = stream.pickle_at(offset, "saved object", max_pickle_bytes);
    archive.pickle_offset_ = offset;
    archive.pickle_size_ = object.length;
    offset += object.length;
    pickle::PicklePrefix keys = stream.pickle_at(offset, "storage key list", max_pickle_bytes);
    offset += keys.length;
    const auto* list = keys.document.root().get<pickle::List>();
    if (list == nullptr) {
        throw_input_error(path, std::string(kFormat) + "the pickle after the saved object is " +
                                    pickle::describe_type(keys.document.root()) +
                                    ", expected the list of storage keys");
    }

    std::unordered_map<std::string_view, const pickle::Storage*> named;
    for (const pickle::Storage* storage : object.document.storages())
        named.emplace(storage->key, storage);
    for (std::size_t i = 0; i < list->items.size(); ++i) {
        std::optional<std::string_view> key = list->items[i].string();
        if (!key) {
            throw_input_error(path, std::string(kFormat) + "storage key " + std::to_string(i) +
                                        " is " + pickle::describe_type(list->items[i]) +
                                        ", expected a str");
        }
        const std::string what = "storage '" + std::string(*key) + "'";
        auto it = named.find(*key);
        if (it == named.end()) {
            throw_input_error(path, std::string(kFormat) + what +
                                        " is listed among the storage keys but the saved "
                                        "object names no such storage");
        }
        if (archive.by_key_.count(std::string(*key)) != 0) {
            throw_input_error(path,
                              std::string(kFormat) + what + " is listed twice among the keys");
        }
        const pickle::Storage& storage = *it->second;
        const std::int64_t count = stream.i64_at(offset, what);
        if (count < 0 || static_cast<std::uint64_t>(count) != storage.numel) {
            throw_input_error(path, std::string(kFormat) + what + " at byte " +
                                        std::to_string(offset) + " counts " +
                                        std::to_string(count) +
                                        " elements, but its persistent id declares " +
                                        std::to_string(storage.numel));
        }
        const std::uint64_t item = storage.dtype ? dtype_size(*storage.dtype) : 1;
        std::optional<std::uint64_t> size = checked_mul(storage.numel, item);
        const std::uint64_t data = offset + 8;
        if (!size || data > archive.file_size_ || *size > archive.file_size_ - data) {
            throw_input_error(path, std::string(kFormat) + what + " (" +
                                        std::to_string(storage.numel) + " elements of " +
                                        std::to_string(item) + " bytes at byte " +
                                        std::to_string(data) + ") runs past the end of the " +
                                        std::to_string(archive.file_size_) + "-byte file");
        }
        archive.by_key_.emplace(std::string(*key), archive.storages_.size());
        archive.storages_.push_back({std::string(*key), offset, data, *size});
        offset = data + *size;
    }
    if (offset != archive.file_size_) {
        throw_input_error(path, std::string(kFormat) + std::to_string(archive.file_size_ - offset) +
                                    " bytes follow the last storage at byte " +
                                    std::to_string(offset) +
                                    ": torch.save writes nothing after it (a damaged file?)");
    }
    for (const pickle::Storage* storage : object.document.storages()) {
        if (archive.by_key_.count(storage->key) == 0) {
            throw_input_error(path, std::string(kFormat) + "storage '" + storage->key +
                                        "' is named by the saved object but not listed among "
                                        "the storage keys: its bytes are not in the file");
        }
    }
    document = std::move(object.document);
    return archive;
}

const LegacyStorage* LegacyArchive::find(std::string_view key) const noexcept {
    auto it = by_key_.find(std::string(key));
    return it == by_key_.end() ? nullptr : &storages_[it->second];
}

}  // namespace z2f::container
