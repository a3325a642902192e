// Little-endian integer access on byte buffers, and a growable little-endian byte writer.
// Used by every binary format reader and writer in the program (zip, pickle, safetensors).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace z2f {

// Reads an unsigned little-endian integer of sizeof(T) bytes at data[offset]. The caller has
// checked the bounds.
template <typename T>
requires std::is_unsigned_v<T> T load_le(const std::byte* data)
noexcept {
    T value = 0;
    for (std::size_t i = 0; i < sizeof(T); ++i) {
        value = static_cast<T>(value |
                               (static_cast<T>(std::to_integer<std::uint8_t>(data[i])) << (8 * i)));
    }
    return value;
}

template <typename T>
requires std::is_unsigned_v<T>
void store_le(std::byte* data, T value) noexcept {
    for (std::size_t i = 0; i < sizeof(T); ++i) {
        data[i] = static_cast<std::byte>((value >> (8 * i)) & 0xFF);
    }
}

inline std::span<const std::byte> as_byte_span(std::string_view text) noexcept {
    return std::as_bytes(std::span(text.data(), text.size()));
}

inline std::string_view as_string_view(std::span<const std::byte> bytes) noexcept {
    return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

// Appends little-endian fields to a byte vector.
class ByteWriter {
  public:
    template <typename T>
    requires std::is_unsigned_v<T>
    void put(T value) {
        std::size_t at = bytes_.size();
        bytes_.resize(at + sizeof(T));
        store_le<T>(bytes_.data() + at, value);
    }
    void put_u8(std::uint8_t value) { bytes_.push_back(static_cast<std::byte>(value)); }
    void put_bytes(std::span<const std::byte> data) {
        bytes_.insert(bytes_.end(), data.begin(), data.end());
    }
    void put_text(std::string_view text) { put_bytes(as_byte_span(text)); }
    void put_repeated(std::byte value, std::size_t count) {
        bytes_.insert(bytes_.end(), count, value);
    }

    std::size_t size() const noexcept { return bytes_.size(); }
    const std::vector<std::byte>& bytes() const noexcept { return bytes_; }
    std::vector<std::byte> take() noexcept { return std::move(bytes_); }

  private:
    std::vector<std::byte> bytes_;
};

}  // namespace z2f
