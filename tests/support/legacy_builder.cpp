#include "support/legacy_builder.hpp"

#include <cstring>

#include "common/bytes.hpp"

namespace z2f::testing {
namespace {

std::vector<std::byte> bytes_of(std::string_view text) {
    std::vector<std::byte> out(text.size());
    std::memcpy(out.data(), text.data(), text.size());
    return out;
}

void append(std::vector<std::byte>& out, const std::vector<std::byte>& more) {
    out.insert(out.end(), more.begin(), more.end());
}

}  // namespace

std::vector<std::byte> legacy_magic_pickle() {
    return bytes_of(
        std::string_view("\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19.", 15));
}

std::vector<std::byte> legacy_sys_info_pickle(bool little_endian) {
    using pickle::PickleValue;
    return pickle::dump(PickleValue::dict(
        {{"protocol_version", 1001},
         {"little_endian", little_endian},
         {"type_sizes", PickleValue::dict({{"short", 2}, {"int", 4}, {"long", 8}})}}));
}

pickle::PickleValue legacy_storage_id(DType dtype, const std::string& key, std::uint64_t numel) {
    using pickle::PickleValue;
    return PickleValue::persistent_id(PickleValue::tuple(
        {"storage", PickleValue::global("torch", std::string(torch_storage_name(dtype))), key,
         "cpu", numel, PickleValue::none()}));
}

pickle::PickleValue legacy_tensor(DType dtype, const std::string& key, std::uint64_t storage_numel,
                                  std::uint64_t offset, const std::vector<std::uint64_t>& shape) {
    using pickle::PickleValue;
    const std::vector<std::uint64_t> strides = pickle::contiguous_strides(shape);
    return PickleValue::reduce(
        PickleValue::global("torch._utils", "_rebuild_tensor_v2"),
        PickleValue::tuple({legacy_storage_id(dtype, key, storage_numel), offset,
                            PickleValue::int_tuple(shape), PickleValue::int_tuple(strides), false,
                            PickleValue::ordered_dict({})}));
}

LegacyFileParts legacy_parts(pickle::PickleValue object, std::vector<LegacyStorageBytes> storages) {
    LegacyFileParts parts;
    parts.magic = legacy_magic_pickle();
    parts.version = pickle::dump(pickle::PickleValue(1001));
    parts.sys_info = legacy_sys_info_pickle();
    parts.object = std::move(object);
    parts.storages = std::move(storages);
    return parts;
}

std::vector<std::byte> build_legacy_file(const LegacyFileParts& parts) {
    std::vector<std::byte> out;
    append(out, parts.magic);
    append(out, parts.version);
    append(out, parts.sys_info);
    append(out, pickle::dump(parts.object));
    if (parts.keys) {
        append(out, pickle::dump(*parts.keys));
    } else {
        std::vector<pickle::PickleValue> keys;
        for (const LegacyStorageBytes& storage : parts.storages)
            keys.emplace_back(storage.key);
        append(out, pickle::dump(pickle::PickleValue::list(std::move(keys))));
    }
    for (const LegacyStorageBytes& storage : parts.storages) {
        const std::int64_t count = storage.count.value_or(
            static_cast<std::int64_t>(storage.bytes.size() / dtype_size(storage.dtype)));
        std::vector<std::byte> prefix(8);
        store_le<std::uint64_t>(prefix.data(), static_cast<std::uint64_t>(count));
        append(out, prefix);
        append(out, storage.bytes);
    }
    append(out, parts.trailer);
    return out;
}

}  // namespace z2f::testing
