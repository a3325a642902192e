#include "driver/destination/run_record.hpp"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "common/byte_size.hpp"
#include "driver/destination/recorded_options.hpp"
#include "zero2fp32/version.hpp"

namespace z2f::driver {
namespace {

// A well-formed JSON value that is not one this tool writes.
struct NotARecord {};

template <typename Enum>
Enum from_json_name(const nlohmann::json& value) {
    std::optional<Enum> parsed = enum_from_name<Enum>(value.get<std::string>());
    if (!parsed)
        throw NotARecord{};
    return *parsed;
}

nlohmann::ordered_json shape_json(const Options& o) {
    nlohmann::ordered_json json;
    json["format"] = enum_name(o.format);
    json["dtype"] = enum_name(o.dtype);
    json["max_shard_size"] = o.max_shard_size ? nlohmann::ordered_json(*o.max_shard_size)
                                              : nlohmann::ordered_json("none");
    json["cast_all_buffers"] = o.cast_all_buffers;
    json["keep_frozen_dtype"] = o.keep_frozen_dtype;
    json["stage1_frozen"] = enum_name(o.stage1_frozen);
    json["exclude_frozen"] = o.exclude_frozen;
    json["untie"] = o.untie;
    json["include"] = o.include;
    json["exclude"] = o.exclude;
    json["strip_prefix"] = o.strip_prefixes;
    json["hdf5_bf16"] = enum_name(o.hdf5_bf16);
    json["tp_rules"] = o.tp_rules;
    json["tp_replicated"] = enum_name(o.tp_replicated);
    json["strip_vocab_padding"] = o.strip_vocab_padding;
    return json;
}

Options shape_from_json(const nlohmann::json& json) {
    Options o;
    o.format = from_json_name<OutputFormat>(json.at("format"));
    o.dtype = from_json_name<DType>(json.at("dtype"));
    const nlohmann::json& shard = json.at("max_shard_size");
    if (shard.is_string()) {
        if (shard.get<std::string>() != "none")
            throw NotARecord{};
        o.max_shard_size.reset();
    } else {
        o.max_shard_size = shard.get<std::uint64_t>();
    }
    o.cast_all_buffers = json.at("cast_all_buffers").get<bool>();
    o.keep_frozen_dtype = json.at("keep_frozen_dtype").get<bool>();
    o.stage1_frozen = from_json_name<Stage1Frozen>(json.at("stage1_frozen"));
    o.exclude_frozen = json.at("exclude_frozen").get<bool>();
    o.untie = json.at("untie").get<bool>();
    o.include = json.at("include").get<std::vector<std::string>>();
    o.exclude = json.at("exclude").get<std::vector<std::string>>();
    o.strip_prefixes = json.at("strip_prefix").get<std::vector<std::string>>();
    o.hdf5_bf16 = from_json_name<Hdf5Bf16>(json.at("hdf5_bf16"));
    o.tp_rules = json.at("tp_rules").get<std::string>();
    o.tp_replicated = from_json_name<TpReplicated>(json.at("tp_replicated"));
    o.strip_vocab_padding = json.at("strip_vocab_padding").get<bool>();
    return o;
}

}  // namespace

std::string encode_manifest(const RunManifest& manifest) {
    nlohmann::ordered_json json;
    json["tool"] = "zero2fp32-mpi";
    json["version"] = kVersion;
    json["state"] = manifest.complete ? "complete" : "writing";
    json["checkpoint"] = manifest.tag_dir;
    json["tag"] = manifest.tag;
    nlohmann::ordered_json inputs = nlohmann::ordered_json::array();
    for (const ManifestInput& input : manifest.inputs)
        inputs.push_back({{"path", input.path}, {"size", input.size}});
    json["inputs"] = std::move(inputs);
    json["options"] = shape_json(manifest.shape);
    json["run"] = manifest.run_identity;
    json["index"] = manifest.index_name ? nlohmann::ordered_json(*manifest.index_name)
                                        : nlohmann::ordered_json(nullptr);
    nlohmann::ordered_json files = nlohmann::ordered_json::array();
    for (const ManifestFile& file : manifest.files) {
        files.push_back({{"name", file.name},
                         {"size", file.size},
                         {"header_length", file.header_length},
                         {"header_crc32", file.header_crc32}});
    }
    json["files"] = std::move(files);
    return json.dump(1) + "\n";
}

std::optional<RunManifest> decode_manifest(const std::string& text) {
    try {
        nlohmann::json json = nlohmann::json::parse(text);
        if (json.at("tool") != "zero2fp32-mpi")
            return std::nullopt;
        RunManifest manifest;
        manifest.version = json.at("version").get<std::string>();
        const std::string state = json.at("state").get<std::string>();
        if (state != "writing" && state != "complete")
            return std::nullopt;
        manifest.complete = state == "complete";
        manifest.tag_dir = json.at("checkpoint").get<std::string>();
        manifest.tag = json.at("tag").get<std::string>();
        if (json.contains("inputs")) {
            for (const auto& input : json.at("inputs")) {
                manifest.inputs.push_back(
                    {input.at("path").get<std::string>(), input.at("size").get<std::uint64_t>()});
            }
        }
        manifest.shape = shape_from_json(json.at("options"));
        manifest.run_identity = json.at("run").get<std::string>();
        if (!json.at("index").is_null())
            manifest.index_name = json.at("index").get<std::string>();
        for (const auto& file : json.at("files")) {
            manifest.files.push_back({file.at("name").get<std::string>(),
                                      file.at("size").get<std::uint64_t>(),
                                      file.at("header_length").get<std::uint64_t>(),
                                      file.at("header_crc32").get<std::uint32_t>()});
        }
        return manifest;
    } catch (const nlohmann::json::exception&) {
        return std::nullopt;
    } catch (const NotARecord&) {
        return std::nullopt;
    }
}

std::vector<std::string> run_differences(const RunManifest& recorded, const RunManifest& planned) {
    std::vector<std::string> differences;
    if (recorded.tag_dir != planned.tag_dir) {
        differences.push_back("checkpoint: '" + recorded.tag_dir + "' recorded, '" +
                              planned.tag_dir + "' now");
    }
    for (const auto& [option, name] : EnumNames<ShapeOption>::kTable) {
        const std::string was = shape_value(recorded.shape, option);
        const std::string is = shape_value(planned.shape, option);
        if (was != is)
            differences.push_back(std::string(name) + ": " + was + " recorded, " + is + " now");
    }
    if (!differences.empty() || recorded.inputs.empty())
        return differences;  // another checkpoint's inputs differ anyway; an old record has none
    for (const ManifestInput& input : planned.inputs) {
        auto found = std::find_if(recorded.inputs.begin(), recorded.inputs.end(),
                                  [&](const ManifestInput& r) { return r.path == input.path; });
        if (found == recorded.inputs.end()) {
            differences.push_back("input '" + input.path + "': not in the record");
        } else if (found->size != input.size) {
            differences.push_back("input '" + input.path + "': " + with_commas(found->size) +
                                  " bytes recorded, " + with_commas(input.size) + " now");
        }
    }
    for (const ManifestInput& input : recorded.inputs) {
        if (std::none_of(planned.inputs.begin(), planned.inputs.end(),
                         [&](const ManifestInput& p) { return p.path == input.path; }))
            differences.push_back("input '" + input.path + "': recorded, not read now");
    }
    return differences;
}

}  // namespace z2f::driver
