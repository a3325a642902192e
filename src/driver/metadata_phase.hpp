// The first two phases, collective: find the checkpoint's files and read their metadata.
//
//   discover   rank 0 lists the tag folder and broadcasts the file list (meta_codec)
//   metadata   rank r interprets inputs r, r+P, ... (zip directory + pickle, never tensor
//              bytes); the encoded results are all-gathered and assembled on every rank
//
// Both throw the same error on every rank, after every rank has agreed that something failed
// (every failing file is named), so they can run inside a PhaseRunner phase.
#pragma once

#include <string>

#include "checkpoint/checkpoint_meta.hpp"
#include "parallel/communicator.hpp"

namespace z2f::driver {

checkpoint::CheckpointFiles discover_files(const parallel::Communicator& comm,
                                           const std::string& checkpoint_dir,
                                           const std::string& tag,
                                           const checkpoint::DiscoveryOptions& options = {});

checkpoint::CheckpointMeta read_metadata(const parallel::Communicator& comm,
                                         const checkpoint::CheckpointFiles& files);

}  // namespace z2f::driver
