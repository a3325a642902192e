// From discovered files and their interpreted contents to a cross-checked CheckpointMeta.
//
// Input files are numbered: model files first (rank order), then optimizer files (rank order).
// The first model file is read in full; other (stage-3) model files only for their frozen
// fragments. `read_file_meta` (file_meta.hpp) interprets one input; `assemble_checkpoint_meta`
// combines all of them and applies every whole-checkpoint check of docs/deepspeed-format.md §1.3,
// §9.2 and §10 that needs no tensor layout: world size against file counts, one layout and stage
// everywhere, refusals of tensor/pipeline parallel, MoE, AutoEP, a missing param_shapes.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "checkpoint/checkpoint_meta.hpp"
#include "checkpoint/file_meta.hpp"

namespace z2f::checkpoint {

std::vector<InputFileSpec> checkpoint_inputs(const CheckpointFiles& files);

// `metas` is indexed like checkpoint_inputs(files).
CheckpointMeta assemble_checkpoint_meta(const CheckpointFiles& files, std::vector<FileMeta> metas);

// Reads every input in this process and assembles (tests, tools, single-rank runs).
CheckpointMeta read_checkpoint_meta(const CheckpointFiles& files);

}  // namespace z2f::checkpoint
