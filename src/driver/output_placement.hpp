// Where OUT_DIR may lie relative to the checkpoint it is made from.
//
// The rule: OUT_DIR equal to CKPT_DIR or to the tag folder, or inside either of them, is a usage
// error (a conversion must not write among the files it reads, and --overwrite must never
// remove one of them), with one exception: universal output into the checkpoint folder, the
// folder that holds the tag folder and `latest` (CKPT_DIR, or CKPT_DIR's parent when CKPT_DIR is
// the tag folder). That is where DeepSpeed puts a universal checkpoint, beside the original, and
// there nothing is written but `<tag>_universal/` and `latest_universal`
// (docs/universal-checkpoint.md §1, driver/output_folder.hpp).
//
//   CKPT_DIR = ckpt           OUT_DIR = ckpt                 universal only
//                             OUT_DIR = ckpt/x, ckpt/tag/x   refused
//   CKPT_DIR = ckpt/tag       OUT_DIR = ckpt                 allowed (not inside CKPT_DIR)
//                             OUT_DIR = ckpt/tag, .../x      refused
//
// Paths are compared once canonical: symbolic links of their existing part resolved (OUT_DIR
// may not exist yet), `.` and `..` removed, so that neither a link nor a relative path hides an
// overlap. The decision itself (`place_output`, `placement_error`) is pure.
#pragma once

#include <string>

#include "checkpoint/discovery.hpp"
#include "zero2fp32/options.hpp"

namespace z2f::driver {

struct OutputPlacement {
    bool inside_checkpoint = false;  // OUT_DIR is CKPT_DIR or the tag folder, or inside one
    bool checkpoint_folder = false;  // OUT_DIR is the folder holding the tag folder
};

// All four canonical (canonical_path); `checkpoint_dir` is the folder holding the tag folder.
OutputPlacement place_output(const std::string& output_dir, const std::string& checkpoint_arg,
                             const std::string& checkpoint_dir, const std::string& tag_dir);

// Empty when `format` may be written at `placement`, else the usage error's message.
std::string placement_error(const OutputPlacement& placement, OutputFormat format,
                            const std::string& output_dir);

// The canonical absolute form of a path whose tail may not exist yet.
std::string canonical_path(const std::string& path);

// The rule for a run: throws Error(kUsage) with placement_error's message. `checkpoint_arg` is
// CKPT_DIR as given, `files` what discovery made of it.
void check_output_placement(const std::string& output_dir, const std::string& checkpoint_arg,
                            const checkpoint::CheckpointFiles& files, OutputFormat format);

}  // namespace z2f::driver
