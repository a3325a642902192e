#include "output/index_json.hpp"

#include <algorithm>
#include <vector>

#include "common/errors.hpp"
#include "output/json_escape.hpp"

namespace z2f::output {
namespace {

// A key and its value already rendered as JSON.
struct Member {
    std::string_view key;
    std::string value;
};

// Writes `"<key>": <value>` members of one object at nesting level 1 (four-space items, the
// closing brace at two spaces), the way Python's indent=2 encoder lays out a nested dict.
void append_object(std::string& out, std::vector<Member>& members, std::string_view what) {
    std::sort(members.begin(), members.end(),
              [](const Member& a, const Member& b) { return a.key < b.key; });
    for (std::size_t i = 1; i < members.size(); ++i) {
        if (members[i].key == members[i - 1].key) {
            throw_internal_error("index json: duplicate " + std::string(what) + " '" +
                                 printable_bytes(members[i].key) + "'");
        }
    }
    if (members.empty()) {
        out += "{}";
        return;
    }
    out += "{\n";
    for (std::size_t i = 0; i < members.size(); ++i) {
        out += "    ";
        append_json_string_python(out, members[i].key, what);
        out += ": ";
        out += members[i].value;
        out += i + 1 < members.size() ? ",\n" : "\n";
    }
    out += "  }";
}

}  // namespace

std::string index_json(std::uint64_t total_size, std::span<const StringPairView> extra_metadata,
                       std::span<const StringPairView> weight_map) {
    std::vector<Member> metadata;
    metadata.reserve(extra_metadata.size() + 1);
    metadata.push_back({"total_size", std::to_string(total_size)});
    for (const auto& [key, value] : extra_metadata) {
        std::string rendered;
        append_json_string_python(rendered, value, "index metadata value");
        metadata.push_back({key, std::move(rendered)});
    }

    std::vector<Member> files;
    files.reserve(weight_map.size());
    std::size_t bytes = 0;
    for (const auto& [tensor, file] : weight_map) {
        std::string rendered;
        append_json_string_python(rendered, file, "shard file name");
        bytes += tensor.size() + rendered.size() + 12;
        files.push_back({tensor, std::move(rendered)});
    }

    std::string out;
    out.reserve(bytes + 128);
    out += "{\n  \"metadata\": ";
    append_object(out, metadata, "index metadata key");
    out += ",\n  \"weight_map\": ";
    append_object(out, files, "tensor name");
    out += "\n}\n";
    return out;
}

}  // namespace z2f::output
