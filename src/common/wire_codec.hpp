// The one encoding of every payload that crosses MPI: the discovered file list, the metadata of
// each input file, phase outcomes, the resume decision, completed files, slot CRCs.
//
// Byte format (little-endian, no padding):
//
//   u8 / u32 / u64    1, 4, 8 bytes
//   i64               the u64 of its two's complement
//   bool              u8 0 or 1; any other value is malformed
//   enum              u8, checked against the enum's last enumerator by the reader
//   string            u64 byte count, then the bytes
//   sequence          u64 element count, then the elements
//   optional          bool present, then the value when present
//
// Only ranks of one run exchange these bytes (the same binary on every rank), so there is no
// version field. The reader still checks every length and every value against the buffer: a
// malformed payload is an internal error naming the payload, never a read out of bounds or an
// allocation the buffer cannot back (an element count is bounded by the bytes left).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/bytes.hpp"

namespace z2f {

class WireWriter {
  public:
    void u8(std::uint8_t value) { out_.put_u8(value); }
    void u32(std::uint32_t value) { out_.put(value); }
    void u64(std::uint64_t value) { out_.put(value); }
    void i64(std::int64_t value) { out_.put(static_cast<std::uint64_t>(value)); }
    void boolean(bool value) { out_.put_u8(value ? 1 : 0); }
    template <typename Enum>
    void enumerator(Enum value) {
        out_.put_u8(static_cast<std::uint8_t>(value));
    }
    void str(std::string_view text);
    void dims(const std::vector<std::uint64_t>& values);

    // `put(writer, element)` writes one element.
    template <typename T, typename Put>
    void sequence(const std::vector<T>& items, Put&& put) {
        u64(items.size());
        for (const T& item : items)
            put(*this, item);
    }
    void strings(const std::vector<std::string>& items);
    template <typename T, typename Put>
    void optional(const std::optional<T>& value, Put&& put) {
        boolean(value.has_value());
        if (value)
            put(*this, *value);
    }

    const std::vector<std::byte>& bytes() const noexcept { return out_.bytes(); }
    std::vector<std::byte> take() noexcept { return out_.take(); }

  private:
    ByteWriter out_;
};

class WireReader {
  public:
    // `payload` names the payload in error messages ("file list", "outcome", ...).
    WireReader(std::span<const std::byte> bytes, std::string_view payload) noexcept
        : bytes_(bytes), payload_(payload) {}

    std::uint8_t u8();
    std::uint32_t u32();
    std::uint64_t u64();
    std::int64_t i64() { return static_cast<std::int64_t>(u64()); }
    bool boolean();
    template <typename Enum>
    Enum enumerator(Enum last) {
        std::uint8_t value = u8();
        if (value > static_cast<std::uint8_t>(last))
            malformed("enumerator out of range");
        return static_cast<Enum>(value);
    }
    std::string str();
    std::vector<std::uint64_t> dims();

    // An element count, checked against the bytes left: each element takes at least
    // `min_element_bytes` (>= 1) on the wire.
    std::size_t count(std::size_t min_element_bytes);
    // `get(reader)` reads one element.
    template <typename Get>
    auto sequence(std::size_t min_element_bytes, Get&& get) {
        std::size_t n = count(min_element_bytes);
        std::vector<decltype(get(*this))> items;
        items.reserve(n);
        for (std::size_t i = 0; i < n; ++i)
            items.push_back(get(*this));
        return items;
    }
    std::vector<std::string> strings();
    template <typename Get>
    auto optional(Get&& get) -> std::optional<decltype(get(*this))> {
        if (!boolean())
            return std::nullopt;
        return get(*this);
    }

    bool at_end() const noexcept { return pos_ == bytes_.size(); }
    // Every byte was consumed; trailing bytes mean the two sides disagree on the format.
    void expect_end();

    [[noreturn]] void malformed(std::string_view what) const;

  private:
    std::span<const std::byte> take(std::size_t n);

    std::span<const std::byte> bytes_;
    std::size_t pos_ = 0;
    std::string_view payload_;
};

}  // namespace z2f
