// Which reader a tag folder takes (docs/architecture.md, "Routing"): the data-parallel one
// (discovery.hpp: ZeRO-1/2/3, BF16_Optimizer), the parallel one (file_grid.hpp: tensor-,
// pipeline- and expert-parallel checkpoints, and checkpoints without ZeRO partitions, whose
// weights the model files hold) or the universal one (universal_discovery.hpp).
//
// The decision is made once, by the tag folder's names (and zero/'s content) alone:
//   parallel       a pipeline layer file, an expert file or expert optimizer file, any file of
//                  a model-parallel rank MM > 00 (unless the MMs number sequence-parallel
//                  ranks, sequence_parallel.hpp), or model files without any optimizer file
//                  (ZeRO-0: nothing partitioned)
//   universal      a universal checkpoint's folder (universal_discovery.hpp): zero/ with
//                  optimizer_state.pt and no *_optim_states.pt beside it
//   data-parallel  everything else
// The rank that discovers broadcasts the result (encode_discovered), so every rank takes the
// same road.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "checkpoint/discovery.hpp"
#include "checkpoint/file_grid.hpp"
#include "checkpoint/universal_discovery.hpp"

namespace z2f::checkpoint {

struct DiscoveredCheckpoint {
    std::variant<CheckpointFiles, FileGrid, UniversalFolder> files;
    // The text of a --tp-rules file, read where the folder was discovered, so that every rank
    // plans with the same rules.
    std::optional<std::string> tp_rules_text;

    bool is_parallel() const noexcept { return std::holds_alternative<FileGrid>(files); }
    const std::string& tag_dir() const noexcept;
    // The folder holding the tag folder (and `latest`).
    const std::string& checkpoint_dir() const noexcept;
};

// The names-only decision (pure): true when the tag folder's names call for the parallel
// reader. `names` are the entries of the tag folder.
bool takes_parallel_reader(const std::vector<std::string>& names);

// Resolves the tag folder and discovers it with the reader its names call for.
DiscoveredCheckpoint discover_any_checkpoint(const std::string& checkpoint_dir,
                                             const std::string& tag,
                                             const DiscoveryOptions& options = {});

// The text of a --tp-rules file (docs/parallel-checkpoints.md §3.3), at most 16 MiB. A path
// that is no readable file is a usage error; its content is checked when the plan is made.
std::string read_tp_rules_file(const std::string& path);

// Wire payload: a kind byte, the optional rules text, then encode_files, encode_file_grid or
// encode_universal_folder as one length-prefixed string.
std::vector<std::byte> encode_discovered(const DiscoveredCheckpoint& discovered);
DiscoveredCheckpoint decode_discovered(std::span<const std::byte> bytes);

}  // namespace z2f::checkpoint
