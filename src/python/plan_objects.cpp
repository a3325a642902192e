#include "python/plan_objects.hpp"

#include <pybind11/stl.h>

namespace py = pybind11;

namespace z2f::python {
namespace {

const char* role_name(TensorRole role) {
    switch (role) {
        case TensorRole::kBuffer:
            return "buffer";
        case TensorRole::kFrozen:
            return "frozen";
        case TensorRole::kAlias:
            return "alias";
        case TensorRole::kTrainable:
            break;
    }
    return "trainable";
}

py::object optional_text(const std::optional<std::string>& text) {
    return text ? py::object(py::str(*text)) : py::object(py::none());
}

py::dict tensor_dict(const ConversionPlan::Tensor& tensor) {
    py::dict entry;
    entry["name"] = tensor.name;
    entry["dtype"] = std::string(dtype_name(tensor.dtype));
    entry["source_dtype"] = std::string(dtype_name(tensor.source_dtype));
    entry["shape"] = py::tuple(py::cast(tensor.shape));
    entry["role"] = role_name(tensor.role);
    entry["alias_of"] = tensor.alias_of.empty() ? py::object(py::none()) : py::str(tensor.alias_of);
    entry["file"] = tensor.file;
    entry["other_files"] = tensor.other_files;
    entry["merge"] = tensor.merge;
    return entry;
}

py::object grid_dict(const std::optional<ConversionPlan::ParallelGrid>& grid) {
    if (!grid)
        return py::none();
    py::dict entry;
    entry["kind"] = grid->kind;
    entry["tp"] = grid->tp;
    entry["pp"] = grid->pp;
    entry["ep"] = grid->ep;
    entry["dp"] = grid->dp;
    entry["zero"] = grid->zero;
    py::list files;
    for (const ConversionPlan::ParallelGrid::File& file : grid->files)
        files.append(py::make_tuple(file.path, file.role));
    entry["files"] = files;
    return entry;
}

}  // namespace

py::dict plan_dict(const ConversionPlan& plan) {
    py::dict entry;
    entry["checkpoint"] = plan.checkpoint;
    entry["tag"] = plan.tag;
    entry["zero_stage"] = plan.zero_stage;
    entry["world_size"] = plan.world_size;
    entry["ds_version"] = plan.ds_version;
    entry["format"] = std::string(enum_name(plan.format));
    py::list files;
    for (const ConversionPlan::File& file : plan.files)
        files.append(py::make_tuple(file.name, file.size));
    entry["files"] = files;
    entry["index"] = optional_text(plan.index);
    py::list tensors;
    for (const ConversionPlan::Tensor& tensor : plan.tensors)
        tensors.append(tensor_dict(tensor));
    entry["tensors"] = tensors;
    entry["warnings"] = plan.warnings;
    entry["parallel"] = grid_dict(plan.parallel);
    return entry;
}

py::dict result_dict(const ConversionResult& result) {
    py::dict entry;
    entry["plan"] = plan_dict(result.plan);
    py::list files;
    for (const FileReport& file : result.files) {
        py::dict report;
        report["name"] = file.name;
        report["size"] = file.size;
        report["ranks"] = file.ranks;
        report["kept"] = file.kept;
        report["complete"] = file.complete;
        report["check"] = file.check;
        files.append(report);
    }
    entry["files"] = files;
    py::list existing;
    for (const ExistingFile& file : result.existing)
        existing.append(py::make_tuple(file.name, std::string(enum_name(file.action))));
    entry["existing"] = existing;
    entry["dry_run"] = result.dry_run;
    entry["executed"] = result.executed;
    entry["verify_only"] = result.verify_only;
    entry["verified"] = result.verified;
    entry["output_bytes"] = result.output_bytes;
    entry["bytes_read"] = result.bytes_read;
    entry["bytes_written"] = result.bytes_written;
    entry["peak_rss_bytes"] = result.peak_rss_bytes;
    entry["wall_seconds"] = result.wall_seconds;
    entry["phase_seconds"] = result.phase_seconds;
    entry["warnings"] = result.warnings;
    entry["index_written"] = result.index_written;
    entry["refusal"] = result.refusal;
    return entry;
}

}  // namespace z2f::python
