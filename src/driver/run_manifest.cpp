#include "driver/run_manifest.hpp"

#include <nlohmann/json.hpp>

#include "zero2fp32/version.hpp"

namespace z2f::driver {

std::string encode_manifest(const RunManifest& manifest) {
    nlohmann::ordered_json json;
    json["tool"] = "zero2fp32-mpi";
    json["version"] = kVersion;
    json["run"] = manifest.run_identity;
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
        if (json.at("tool") != "zero2fp32-mpi" || json.at("version") != kVersion) {
            return std::nullopt;
        }
        RunManifest manifest;
        manifest.run_identity = json.at("run").get<std::string>();
        for (const auto& file : json.at("files")) {
            manifest.files.push_back({file.at("name").get<std::string>(),
                                      file.at("size").get<std::uint64_t>(),
                                      file.at("header_length").get<std::uint64_t>(),
                                      file.at("header_crc32").get<std::uint32_t>()});
        }
        return manifest;
    } catch (const nlohmann::json::exception&) {
        return std::nullopt;
    }
}

}  // namespace z2f::driver
