// Test helpers that read the reference outputs of DeepSpeed's zero_to_fp32.py under
// tests/data/deepspeed/*/ref/ with nlohmann-json, independently of the code under test.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace z2f::test_data {

inline std::filesystem::path deepspeed_data() {
    return std::filesystem::path(Z2F_TEST_DATA) / "deepspeed";
}

inline std::vector<std::byte> read_file(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        throw std::runtime_error("cannot open " + path.string());
    }
    std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::vector<std::byte> bytes(chars.size());
    if (!chars.empty()) {
        std::memcpy(bytes.data(), chars.data(), chars.size());
    }
    return bytes;
}

inline std::string read_text(const std::filesystem::path& path) {
    const std::vector<std::byte> bytes = read_file(path);
    return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

struct RefTensor {
    std::string name;
    std::string dtype;
    std::vector<std::uint64_t> shape;
    std::uint64_t begin = 0;
    std::uint64_t end = 0;
};

struct RefSafetensors {
    std::uint64_t header_length = 0;
    std::vector<std::byte> head;  // the first 8 + N bytes of the file
    std::uint64_t file_size = 0;
    std::vector<RefTensor> tensors;  // in header order
};

inline RefSafetensors read_ref_safetensors(const std::filesystem::path& path) {
    const std::vector<std::byte> bytes = read_file(path);
    RefSafetensors ref;
    std::memcpy(&ref.header_length, bytes.data(), 8);  // little-endian host
    ref.head.assign(bytes.begin(),
                    bytes.begin() + static_cast<std::ptrdiff_t>(8 + ref.header_length));
    ref.file_size = bytes.size();
    const std::string text(reinterpret_cast<const char*>(bytes.data()) + 8, ref.header_length);
    const auto header = nlohmann::ordered_json::parse(text);
    for (const auto& [name, value] : header.items()) {
        if (name == "__metadata__") {
            continue;
        }
        RefTensor tensor;
        tensor.name = name;
        tensor.dtype = value.at("dtype").get<std::string>();
        tensor.shape = value.at("shape").get<std::vector<std::uint64_t>>();
        tensor.begin = value.at("data_offsets").at(0).get<std::uint64_t>();
        tensor.end = value.at("data_offsets").at(1).get<std::uint64_t>();
        ref.tensors.push_back(std::move(tensor));
    }
    return ref;
}

struct RefIndex {
    std::uint64_t total_size = 0;
    std::map<std::string, std::string> weight_map;
};

inline RefIndex read_ref_index(const std::filesystem::path& path) {
    const auto index = nlohmann::json::parse(read_text(path));
    RefIndex ref;
    ref.total_size = index.at("metadata").at("total_size").get<std::uint64_t>();
    ref.weight_map = index.at("weight_map").get<std::map<std::string, std::string>>();
    return ref;
}

// Every reference .safetensors file, as paths relative to tests/data/deepspeed.
inline std::vector<std::filesystem::path> all_ref_safetensors() {
    std::vector<std::filesystem::path> files;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(deepspeed_data())) {
        if (entry.is_regular_file() && entry.path().extension() == ".safetensors") {
            files.push_back(entry.path());
        }
    }
    std::sort(files.begin(), files.end());
    return files;
}

}  // namespace z2f::test_data
