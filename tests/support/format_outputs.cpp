#include "support/format_outputs.hpp"

#include <map>

#include "io/dtype_convert.hpp"
#include "support/output_reader.hpp"

namespace z2f::testing {

std::vector<ExpectedTensor> read_format_outputs(const std::string& dir, OutputFormat format,
                                                const std::vector<ExpectedTensor>& expected) {
    std::vector<ExpectedTensor> tensors;
    if (format == OutputFormat::kHdf5) {
        for (const ExpectedTensor& truth : expected) {
            Hdf5Dataset dataset = read_hdf5_dataset(dir + "/model.h5", truth.name);
            DType dtype = truth.dtype;
            if (dataset.element_size == 4 && is_floating(truth.dtype))
                dtype = DType::kF32;
            else if (dataset.element_size == 2 && is_floating(truth.dtype))
                dtype = dataset.dtype_attribute == "bfloat16" ? DType::kBF16 : DType::kF16;
            tensors.push_back({truth.name, dtype, dataset.shape, dataset.bytes});
        }
        return tensors;
    }
    for (const std::string& name : list_tree(dir)) {
        std::vector<ExpectedTensor> part;
        if (format == OutputFormat::kSafetensors && name.ends_with(".safetensors"))
            part = read_safetensors(dir + "/" + name).tensors;
        else if (format == OutputFormat::kTorch && name.ends_with(".bin"))
            part = read_torch_state_dict(dir + "/" + name);
        tensors.insert(tensors.end(), part.begin(), part.end());
    }
    return tensors;
}

std::vector<ExpectedTensor> read_format_outputs_with_aliases(
    const std::string& dir, OutputFormat format, const std::vector<ExpectedTensor>& expected) {
    std::vector<ExpectedTensor> tensors = read_format_outputs(dir, format, expected);
    if (format != OutputFormat::kSafetensors)
        return tensors;
    std::map<std::string, std::string> aliases;
    for (const std::string& name : list_tree(dir)) {
        if (!name.ends_with(".safetensors"))
            continue;
        for (const auto& [key, value] : read_safetensors(dir + "/" + name).metadata) {
            if (key != "format")
                aliases.emplace(key, value);
        }
    }
    for (const auto& [alias, owner] : aliases) {
        const ExpectedTensor* target = find_tensor(tensors, owner);
        if (target == nullptr)
            continue;  // state_dict_differences says the alias is missing
        ExpectedTensor copy = *target;
        copy.name = alias;
        tensors.push_back(std::move(copy));
    }
    return tensors;
}

std::string state_dict_differences(const std::vector<ExpectedTensor>& ours,
                                   const std::vector<ExpectedTensor>& expected, DType dtype) {
    std::string out;
    if (ours.size() != expected.size()) {
        out += std::to_string(ours.size()) + " tensors written, " +
               std::to_string(expected.size()) + " expected\n";
    }
    for (const ExpectedTensor& truth : expected) {
        const ExpectedTensor* tensor = find_tensor(ours, truth.name);
        if (tensor == nullptr) {
            out += truth.name + ": missing\n";
            continue;
        }
        if (tensor->shape != truth.shape)
            out += truth.name + ": another shape\n";
        std::vector<std::byte> want = truth.bytes;
        if (is_floating(truth.dtype) && truth.dtype != dtype) {
            want.resize(truth.bytes.size() / dtype_size(truth.dtype) * dtype_size(dtype));
            io::convert_elements(truth.dtype, truth.bytes, dtype, want);
        }
        if (tensor->bytes != want)
            out += truth.name + ": other bytes\n";
    }
    return out;
}

}  // namespace z2f::testing
