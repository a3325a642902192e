#include "driver/finish_phase.hpp"

#include "checkpoint/discovery.hpp"
#include "common/errors.hpp"
#include "driver/destination/folders.hpp"
#include "driver/destination/inspection.hpp"
#include "driver/destination/run_record.hpp"
#include "io/posix_file.hpp"

namespace z2f::driver {
namespace {

bool same_content(const std::string& path, const std::string& content) {
    return io::is_regular_file(path) && io::file_size(path) == content.size() &&
           io::read_small_file(path, content.size()) == content;
}

// Leaves a file that already holds `content` as it is (same inode, no bytes written), so that
// --resume of a finished output changes nothing. Returns whether it wrote.
bool write_unless_same(const std::string& path, const std::string& content) {
    if (same_content(path, content))
        return false;
    io::write_file_atomically(path, content);
    return true;
}

}  // namespace

void write_index(const PhaseRunner& phases, const run::RunPlan& plan, const std::string& output_dir,
                 const Options& options, IndexOutcome& outcome) {
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
    bool changed = false;
    if (plan.index_name) {
        changed |= write_unless_same(output_dir + "/" + *plan.index_name, plan.index_json);
    }
    outcome.index_written = true;
    // Universal output is a training checkpoint, not a model folder for from_pretrained.
    if (options.copy_hf_files && plan.format != OutputFormat::kUniversal) {
        const std::string& source = plan.checkpoint.checkpoint_dir;
        for (const std::string& name : checkpoint::find_hf_side_files(source)) {
            std::string target = output_dir + "/" + name;
            std::string content = io::read_small_file(source + "/" + name, 256u << 20);
            if (io::path_exists(target) && !options.overwrite && !options.resume) {
                if (!same_content(target, content))
                    phases.say(MessageLevel::kWarning,
                               "not copying " + name + ": already in the output directory");
                continue;
            }
            if (write_unless_same(target, content)) {
                changed = true;
                phases.say(MessageLevel::kVerbose, "copied " + name);
            }
        }
    }
    // Kept after success: --verify learns from it how the files were written, --resume that
    // they are complete.
    const std::string manifest = manifest_path(plan, output_dir);
    if (write_unless_same(manifest, encode_manifest(manifest_of(plan, options, true)))) {
        if (!plan.output_folder.empty())
            io::sync_directory(output_dir + "/" + plan.output_folder);
        changed = true;
    }
    if (changed)
        io::sync_directory(output_dir);
    outcome.record_complete = true;
}

}  // namespace z2f::driver
