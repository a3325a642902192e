// One model of a checkpoint's input files, for every kind of checkpoint: each reader lists its
// inputs as {path, kind}; `read_file_meta` interprets any of them into one FileMeta; the
// metadata phase gathers those over MPI through one codec (meta_codec.hpp) and hands them to the
// assembly of the checkpoint's kind:
//
//   kind of checkpoint    its inputs, in this order                    assembled by
//   data-parallel ZeRO    kFirstModel, kOtherModel..., kOptim...       assemble_checkpoint_meta
//   universal folder      kFirstModel, kModelParallelRank or           assemble_universal_meta
//                         kOtherModel..., kUniversalParam...
//   file grid (TP/PP/EP)  kGridModel..., kGridOptim..., kStateDict...  assemble_parallel_meta
//
// A FileMeta holds names, shapes, dtypes and byte ranges, never tensor bytes.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "checkpoint/parallel_meta.hpp"

namespace z2f::checkpoint {

enum class InputKind : std::uint8_t {
    kFirstModel,      // the first model file, read in full
    kOtherModel,      // another stage-3 rank's model file: its frozen fragments only
    kOptim,           // a ZeRO optimizer file
    kUniversalParam,  // zero/<param>/fp32.pt of a universal checkpoint (universal_assemble.hpp)
    // mp_rank_MM_model_states.pt (MM > 00) of a universal checkpoint of a tensor- or
    // pipeline-parallel run: read whole, like the first (universal_assemble.hpp).
    kModelParallelRank,
    // The files of a grid (parallel_assemble.hpp): model files with the keys only parallel
    // checkpoints have (parallel_states_reader.hpp, zero0_masters.hpp), optimizer files with
    // their slice mappings, and plain state dicts (pipeline layer files, MoE expert files).
    kGridModel,
    kGridOptim,
    kStateDict,
};

struct InputFileSpec {
    std::string path;
    InputKind kind = InputKind::kOptim;
};

// The interpreted content of one input file. The extras of model and optimizer files are empty
// unless the kind reads them (kGridModel, kGridOptim).
struct FileMeta {
    std::uint64_t size = 0;
    std::variant<ModelFile, OptimFile, StateDictInfo> info;
    std::vector<InputRecord> records;  // the storage records the info's tensors lie in
    friend bool operator==(const FileMeta&, const FileMeta&) = default;
};

// Opens `input.path` and interprets it as its kind says; `index` is its place in the inputs
// (every TensorRef and record names it).
FileMeta read_file_meta(const InputFileSpec& input, std::uint32_t index);

}  // namespace z2f::checkpoint
