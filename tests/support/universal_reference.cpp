#include "support/universal_reference.hpp"

#include <algorithm>
#include <filesystem>
#include <stdexcept>

#include "container/torch_file.hpp"
#include "support/expected_state.hpp"
#include "support/test_files.hpp"

namespace z2f::testing {

namespace fs = std::filesystem;

std::string universal_root() {
    return std::string(Z2F_TEST_DATA) + "/universal";
}

std::vector<std::string> universal_fixtures() {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(universal_root())) {
        if (entry.is_directory()) {
            names.push_back(entry.path().filename().string());
        }
    }
    std::sort(names.begin(), names.end());
    return names;
}

std::string universal_tag_dir(const std::string& fixture) {
    return universal_root() + "/" + fixture + "/global_step2_universal";
}

UniversalTensorFile read_universal_tensor_file(const std::string& path) {
    container::TorchFile file = container::TorchFile::open(path);
    UniversalTensorFile out;
    const pickle::Value* value = &file.root();
    if (const auto* dict = value->get<pickle::Dict>()) {
        out.param_dict = true;
        for (const auto& [key, item] : dict->items) {
            const std::optional<std::string_view> name = key.string();
            std::string entry = name ? std::string(*name) : "?";
            if (item.is_bool())
                entry += item.as_bool() ? "=True" : "=False";
            else if (item.is_int())
                entry += "=" + std::to_string(item.as_int());
            else if (item.get<pickle::Tensor>() == nullptr)
                entry += "=<other>";
            out.entries.push_back(entry);
        }
        value = dict->find("param");
        if (value == nullptr) {
            throw std::runtime_error(path + ": no 'param'");
        }
    }
    const auto* tensor = value->get<pickle::Tensor>();
    if (tensor == nullptr) {
        throw std::runtime_error(path + ": not a tensor");
    }
    container::TensorBytes located = file.locate(*tensor, "param");
    out.dtype = located.dtype;
    out.shape = located.shape;
    out.requires_grad = tensor->requires_grad;
    out.storage_numel = tensor->storage != nullptr ? tensor->storage->numel : 0;
    out.bytes = read_range(path, located.offset, located.length);
    return out;
}

std::vector<std::string> parallel_universal_fixtures() {
    return {"tp2_dp2_z1_fp32", "pp2_dp2_z1_fp32"};
}

std::string parallel_fixture_dir(const std::string& fixture) {
    return std::string(Z2F_TEST_DATA) + "/deepspeed-parallel/" + fixture;
}

std::string parallel_universal_reference(const std::string& fixture) {
    return parallel_fixture_dir(fixture) + "/ref/universal";
}

std::vector<std::string> universal_param_folders(const std::string& tag_dir) {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(tag_dir + "/zero")) {
        if (entry.is_directory()) {
            names.push_back(entry.path().filename().string());
        }
    }
    std::sort(names.begin(), names.end());
    return names;
}

void assemble_universal_checkpoint(const std::string& fixture, const std::string& dir) {
    copy_tree(universal_root() + "/" + fixture, dir);
    const std::string source = fixture_path(fixture + "/global_step2");
    for (const auto& entry : fs::directory_iterator(source)) {
        const std::string name = entry.path().filename().string();
        if (name.ends_with("_model_states.pt")) {
            fs::copy_file(entry.path(), dir + "/global_step2_universal/" + name);
        }
    }
    fs::remove(dir + "/NOTE");
}

}  // namespace z2f::testing
