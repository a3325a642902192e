// Output files in folders of OUT_DIR. Hugging Face outputs lie in OUT_DIR itself; a universal
// checkpoint puts every file but latest_universal under RunPlan::output_folder
// ("<tag>_universal", docs/universal-checkpoint.md §1), in subfolders (zero/<param>/). What the
// output-directory checks, the prepare and the index phases need to know about that tree:
//
//   - the run manifest lives in the output folder, so that a universal checkpoint written beside
//     the original (OUT_DIR = the folder holding `latest`) adds nothing there but its own
//     folder and latest_universal;
//   - the folders to create before writing (and to fsync before the index names them);
//   - the files of the output folder this run does not plan: outputs of another run that
//     --overwrite removes (Hugging Face formats find theirs by name, is_output_like_name).
#pragma once

#include <string>
#include <vector>

#include "run/run_plan.hpp"

namespace z2f::driver {

// OUT_DIR/<output folder>/.zero2fp32-run.json (destination/run_record.hpp), or
// OUT_DIR/.zero2fp32-run.json.
std::string manifest_path(const run::RunPlan& plan, const std::string& output_dir);

// Where a finished output's run record is, found from OUT_DIR alone (--verify knows no plan yet):
// OUT_DIR/.zero2fp32-run.json, else, for a universal checkpoint, the record in the folder that
// OUT_DIR/latest_universal names, or in the only folder of OUT_DIR that holds one. The first
// candidate when none exists.
std::string recorded_manifest_path(const std::string& output_dir);

// Every folder that holds a planned file, relative to OUT_DIR, parents before children; empty
// for outputs that lie in OUT_DIR itself.
std::vector<std::string> output_subfolders(const run::RunPlan& plan);

// Files under OUT_DIR/<output folder> (recursively, relative to OUT_DIR) that are neither
// planned files, the run's temp names (run_temp_names), nor the manifest; sorted. Empty without
// an output folder or when it does not exist. Throws an output error when the folder holds
// *_optim_states.pt files: it is then a tag folder of an ordinary checkpoint, which no --overwrite
// may mix or remove.
std::vector<std::string> unplanned_files_in_output_folder(const run::RunPlan& plan,
                                                          const std::string& output_dir);

}  // namespace z2f::driver
