#include "output/shard_size.hpp"

#include <string>

#include "common/byte_size.hpp"
#include "common/errors.hpp"

namespace z2f::output {

std::optional<std::uint64_t> parse_max_shard_size(std::string_view text, std::string_view option) {
    std::string_view value = text;
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t'))
        value.remove_prefix(1);
    while (!value.empty() && (value.back() == ' ' || value.back() == '\t'))
        value.remove_suffix(1);
    if (value.size() == 4) {
        std::string lower;
        for (char c : value)
            lower += c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c;
        if (lower == "none")
            return std::nullopt;
    }
    std::uint64_t bytes = parse_byte_size(text, option);
    if (bytes == 0) {
        throw_usage_error("invalid " + std::string(option) + " '" + std::string(text) +
                          "': a shard size of 0 bytes would put every tensor in a file of its "
                          "own; give a size such as 5GB, or 'none' for a single file");
    }
    return bytes;
}

}  // namespace z2f::output
