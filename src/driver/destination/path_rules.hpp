// Where the outputs may go: the path mistakes that are usage errors, found before anything is
// written (and before OUT_DIR is looked into).
//
// `check_output_path` is the one place that decides. It throws Error(kUsage) when
//   - OUT_DIR is empty;
//   - OUT_DIR exists and is not a directory (a regular file, a device, a dangling link);
//   - OUT_DIR does not exist and its name ends in .bin, .safetensors, .pt, .pth or .h5:
//     zero_to_fp32.py's `output_file` habit, where OUT_DIR is a folder (the message suggests a
//     folder outside the checkpoint, also when the habit is run from inside it);
//   - OUT_DIR, resolved, is CKPT_DIR or inside it, or is the tag folder or inside it, both
//     resolved: the outputs would be mixed into the checkpoint (and a later run would read
//     them as part of it); --overwrite must never remove one of the checkpoint's files.
//   - OUT_DIR, resolved, is the checkpoint folder (the folder that holds the tag folder and
//     `latest`: CKPT_DIR, or its parent when CKPT_DIR is the tag folder), except for universal
//     output: there DeepSpeed puts a universal checkpoint beside the original, and nothing is
//     written but `<tag>_universal/` and `latest_universal` (docs/universal-checkpoint.md §1):
//
//       CKPT_DIR = ckpt        OUT_DIR = ckpt                 universal only
//                              OUT_DIR = ckpt/x, ckpt/tag/x   refused
//       CKPT_DIR = ckpt/tag    OUT_DIR = ckpt                 universal only
//                              OUT_DIR = ckpt/x               allowed (not inside CKPT_DIR)
//                              OUT_DIR = ckpt/tag, .../x      refused
// "Resolved" means: absolute, symbolic links of the existing part followed (realpath), the part
// that does not exist yet appended as written with "." and ".." applied to the text. It reads
// the file system (stat, realpath) and changes nothing; its only inputs are the three paths and
// the output format, so a format whose convention is to write into the checkpoint folder can be
// let through here, and only here.
#pragma once

#include <string>

#include "zero2fp32/options.hpp"

namespace z2f::driver {

struct OutputPaths {
    std::string checkpoint_dir;  // as given (CKPT_DIR)
    std::string tag_dir;         // absolute, as discovery found it
    std::string output_dir;      // as given (OUT_DIR)
    OutputFormat format = OutputFormat::kSafetensors;
    // The folder holding the tag folder, as discovery found it (where universal output may go).
    std::string checkpoint_folder;
};

void check_output_path(const OutputPaths& paths);

// `path` made absolute with the symbolic links of its existing part resolved (see above).
std::string resolve_path(const std::string& path);

}  // namespace z2f::driver
