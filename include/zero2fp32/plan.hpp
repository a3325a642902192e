// What a conversion would write, computed in one process without MPI: the output files and every
// tensor (name, dtype, shape, the file holding its data). Reads the checkpoint's metadata only
// (zip directories and pickles), never tensor bytes; nothing is written.
//
//   z2f::ConversionPlan plan = z2f::plan_conversion("/ckpt/checkpoint-500", z2f::Options{});
//   for (const auto& tensor : plan.tensors) ... tensor.name, tensor.dtype, tensor.shape,
//   tensor.file
//
// Throws z2f::Error (malformed or unsupported checkpoint, bad options).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "zero2fp32/dtype.hpp"
#include "zero2fp32/options.hpp"

namespace z2f {

// Where a tensor sits in zero_to_fp32's state dict, which is also the output order.
enum class TensorRole : std::uint8_t {
    kBuffer,     // persistent module buffer
    kFrozen,     // requires_grad=False parameter
    kTrainable,  // reassembled from the fp32 master partitions
    kAlias,      // tied parameter: shares the bytes of another tensor
};

struct ConversionPlan {
    struct File {
        std::string name;  // inside the output directory
        std::uint64_t size = 0;
    };
    struct Tensor {
        std::string name;
        DType dtype = DType::kF32;         // as written
        DType source_dtype = DType::kF32;  // as stored in the checkpoint
        std::vector<std::uint64_t> shape;  // () is a scalar
        TensorRole role = TensorRole::kTrainable;
        std::string alias_of;                  // kAlias: the tensor whose bytes it shares
        std::string file;                      // the output file that holds its data
        std::vector<std::string> other_files;  // formats that write a tensor to several files
        // Parallel checkpoints: how the tensor is merged ("cat dim 0 over 2 TP ranks",
        // "replicated over 2 TP ranks, checked equal", "expert 3 of 4, MoE layer 0", ...);
        // empty for data-parallel checkpoints.
        std::string merge;
    };
    // A tensor-, pipeline- or expert-parallel checkpoint, or one without ZeRO partitions
    // (docs/parallel-checkpoints.md): its degrees and its files.
    struct ParallelGrid {
        struct File {
            std::string path;
            std::string role;  // "model, stage 0, TP rank 1", "optimizer, ... DP rank 0", ...
        };
        std::string kind;  // "tensor-parallel", "pipeline" or "mixture-of-experts"
        std::uint32_t tp = 1;
        std::uint32_t pp = 1;
        std::uint32_t ep = 1;
        std::uint32_t dp = 1;
        // Ulysses sequence parallelism: weights whole on each of `sp` ranks, ZeRO over sp x dp.
        std::uint32_t sp = 1;
        bool zero = false;  // ZeRO-1/2 partitions hold the weights (else the model files)
        std::vector<File> files;
    };

    std::string checkpoint;  // the tag folder
    std::string tag;
    int zero_stage = 0;
    std::uint32_t world_size = 0;
    std::string ds_version;
    OutputFormat format = OutputFormat::kSafetensors;
    std::vector<File> files;
    std::optional<std::string> index;  // sharded outputs: the index file's name
    std::vector<Tensor> tensors;       // in output (state-dict) order
    std::vector<std::string> warnings;
    std::optional<ParallelGrid> parallel;  // absent for data-parallel checkpoints
};

ConversionPlan plan_conversion(const std::filesystem::path& checkpoint, const Options& options);

}  // namespace z2f
