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
    out.bytes = read_range(path, located.offset, located.length);
    return out;
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
