#include "driver/finish_phase.hpp"

#include "checkpoint/discovery.hpp"
#include "common/errors.hpp"
#include "driver/output_folder.hpp"
#include "driver/run_manifest.hpp"
#include "io/posix_file.hpp"

namespace z2f::driver {

void write_index(const PhaseRunner& phases, const run::RunPlan& plan, const std::string& output_dir,
                 const Options& options) {
    if (!phases.is_root())
        return;
    for (const run::OutputFileRecord& file : plan.files) {
        std::string path = output_dir + "/" + file.name();
        if (!io::is_regular_file(path)) {
            throw_output_error("'" + path +
                               "' was written by another rank but is not visible on rank 0: is "
                               "the output directory on a file system shared by all nodes?");
        }
        if (io::file_size(path) != file.layout.size) {
            throw_output_error("'" + path + "' has " + std::to_string(io::file_size(path)) +
                               " bytes, expected " + std::to_string(file.layout.size));
        }
    }
    // The renames into the folders are durable before the index names them (children first).
    const std::vector<std::string> folders = output_subfolders(plan);
    for (auto folder = folders.rbegin(); folder != folders.rend(); ++folder)
        io::sync_directory(output_dir + "/" + *folder);
    if (plan.index_name) {
        io::write_file_atomically(output_dir + "/" + *plan.index_name, plan.index_json);
    }
    // Universal output is a training checkpoint, not a model folder for from_pretrained.
    if (options.copy_hf_files && plan.format != OutputFormat::kUniversal) {
        const std::string& source = plan.checkpoint.checkpoint_dir;
        for (const std::string& name : checkpoint::find_hf_side_files(source)) {
            std::string target = output_dir + "/" + name;
            if (io::path_exists(target) && !options.overwrite && !options.resume) {
                phases.say(MessageLevel::kWarning,
                           "not copying " + name + ": already in the output directory");
                continue;
            }
            io::write_file_atomically(target, io::read_small_file(source + "/" + name, 256u << 20));
            phases.say(MessageLevel::kVerbose, "copied " + name);
        }
    }
    io::remove_file(manifest_path(plan, output_dir));
    io::sync_directory(output_dir);
}

}  // namespace z2f::driver
