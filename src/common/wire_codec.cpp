#include "common/wire_codec.hpp"

#include <algorithm>

#include "common/errors.hpp"

namespace z2f {

// Out of line: inlined into callers, GCC 12 reports a false -Warray-bounds on the insert.
void WireWriter::str(std::string_view text) {
    u64(text.size());
    out_.put_text(text);
}

void WireWriter::dims(const std::vector<std::uint64_t>& values) {
    u64(values.size());
    for (std::uint64_t value : values)
        u64(value);
}

void WireWriter::strings(const std::vector<std::string>& items) {
    sequence(items, [](WireWriter& out, const std::string& item) { out.str(item); });
}

std::span<const std::byte> WireReader::take(std::size_t n) {
    if (n > bytes_.size() - pos_)
        malformed("truncated");
    std::span<const std::byte> span = bytes_.subspan(pos_, n);
    pos_ += n;
    return span;
}

std::uint8_t WireReader::u8() {
    return std::to_integer<std::uint8_t>(take(1)[0]);
}

std::uint32_t WireReader::u32() {
    return load_le<std::uint32_t>(take(4).data());
}

std::uint64_t WireReader::u64() {
    return load_le<std::uint64_t>(take(8).data());
}

bool WireReader::boolean() {
    std::uint8_t value = u8();
    if (value > 1)
        malformed("boolean is neither 0 nor 1");
    return value == 1;
}

std::size_t WireReader::count(std::size_t min_element_bytes) {
    std::uint64_t n = u64();
    if (n > (bytes_.size() - pos_) / std::max<std::size_t>(min_element_bytes, 1))
        malformed("element count exceeds the payload");
    return static_cast<std::size_t>(n);
}

std::string WireReader::str() {
    std::size_t n = count(1);
    std::span<const std::byte> span = take(n);
    return std::string(reinterpret_cast<const char*>(span.data()), n);
}

std::vector<std::uint64_t> WireReader::dims() {
    return sequence(8, [](WireReader& in) { return in.u64(); });
}

std::vector<std::string> WireReader::strings() {
    return sequence(8, [](WireReader& in) { return in.str(); });
}

void WireReader::expect_end() {
    if (!at_end())
        malformed("trailing bytes");
}

void WireReader::malformed(std::string_view what) const {
    throw_internal_error("malformed " + std::string(payload_) + " payload between ranks (" +
                         std::string(what) + " at byte " + std::to_string(pos_) + " of " +
                         std::to_string(bytes_.size()) + ")");
}

}  // namespace z2f
