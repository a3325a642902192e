// The first two phases, collective: find the checkpoint's files and read their metadata.
//
//   discover   rank 0 lists the tag folder, decides which reader it takes
//              (checkpoint/routing.hpp), reads a --tp-rules file, and broadcasts all of it
//   metadata   rank r interprets inputs r, r+P, ... (checkpoint/file_meta.hpp: zip directory +
//              pickle, never tensor bytes); one gather brings every input's FileMeta to every
//              rank (checkpoint/meta_codec.hpp), where the assembly of the kind discovery chose
//              cross-checks them (assemble_checkpoint_meta or assemble_parallel_meta)
//
// Both throw the same error on every rank, after every rank has agreed that something failed
// (every failing file is named), so they can run inside a PhaseRunner phase.
#pragma once

#include <string>

#include "checkpoint/checkpoint_meta.hpp"
#include "checkpoint/parallel_meta.hpp"
#include "checkpoint/routing.hpp"
#include "mpi/communicator.hpp"
#include "run/tensor_source.hpp"
#include "zero2fp32/options.hpp"

namespace z2f::driver {

// Either kind of checkpoint, and options.tp_rules' text (parallel checkpoints only).
checkpoint::DiscoveredCheckpoint discover(const mpi::Communicator& comm,
                                          const std::string& checkpoint_dir,
                                          const Options& options);

// The metadata of either kind, by the reader discovery chose.
run::CheckpointMetadata read_checkpoint_metadata(const mpi::Communicator& comm,
                                                 const checkpoint::DiscoveredCheckpoint& found);

}  // namespace z2f::driver
