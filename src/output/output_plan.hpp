// From the selected tensors to the set of output files, following the Hugging Face rules
// (docs/output-formats.md §4): the shard split, the file names, the index, and the per-format
// treatment of tied weights:
//   safetensors  an alias is written nowhere and is not in weight_map; `alias -> owner` goes
//                into every shard's __metadata__ (as huggingface_hub does)
//   torch .bin   an alias shares its owner's storage in the pickle, in the owner's shard
//   HDF5         an alias is a hard link to its owner's dataset, in the owner's file
// `layout_output_file` then computes one file's byte layout (output_layout.hpp). Every rank lays
// out every file in the plan phase: ownership balances ranks by the layouts' slot sizes, rank 0
// needs every file's size and header for the output-directory checks and the run manifest, and
// --verify and the final size checks compare against them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "output/output_layout.hpp"
#include "plan/tensor_plan.hpp"

namespace z2f::output {

struct OutputPlanOptions {
    OutputFormat format = OutputFormat::kSafetensors;
    std::optional<std::uint64_t> max_shard_size;  // nullopt: a single file
};

struct OutputFile {
    std::string name;
    std::vector<std::uint32_t> tensors;  // plan indices, in the order the file lists them
    std::uint64_t data_bytes = 0;        // unique tensor bytes in the file
};

struct OutputPlan {
    OutputFormat format = OutputFormat::kSafetensors;
    std::vector<OutputFile> files;
    // safetensors: alias -> owner, recorded in every shard's __metadata__.
    std::vector<std::pair<std::string, std::string>> tied_metadata;
    std::uint64_t total_size = 0;  // each storage once
    // Sharded output only: the index file's name and exact bytes.
    std::optional<std::string> index_name;
    std::string index_json;
};

OutputPlan plan_outputs(const plan::TensorPlan& plan, const OutputPlanOptions& options);

struct LayoutOptions {
    bool hdf5_bf16_as_float = false;
    std::string writer_version;     // HDF5 root attribute
    std::string source_checkpoint;  // HDF5 root attribute
};

OutputFileLayout layout_output_file(const plan::TensorPlan& plan, const OutputPlan& outputs,
                                    std::uint32_t file, const LayoutOptions& options);

}  // namespace z2f::output
