#include "driver/destination/folders.hpp"

#include <algorithm>
#include <set>

#include "checkpoint/discovery.hpp"
#include "checkpoint/universal_discovery.hpp"
#include "common/errors.hpp"
#include "driver/destination/inspection.hpp"
#include "driver/destination/run_record.hpp"
#include "io/posix_file.hpp"

namespace z2f::driver {
namespace {

// Every entry under `dir`/`relative` but directories, as paths relative to `dir`. A symbolic
// link is an entry, never followed: --overwrite removes the link, nothing outside the folder.
void collect_files(const std::string& dir, const std::string& relative,
                   std::vector<std::string>& out) {
    for (const std::string& name : io::list_directory(dir + "/" + relative)) {
        const std::string path = relative + "/" + name;
        if (io::is_directory(dir + "/" + path) && !io::is_symbolic_link(dir + "/" + path)) {
            collect_files(dir, path, out);
        } else {
            out.push_back(path);
        }
    }
}

}  // namespace

std::string manifest_path(const run::RunPlan& plan, const std::string& output_dir) {
    if (plan.output_folder.empty())
        return output_dir + "/" + kManifestName;
    return output_dir + "/" + plan.output_folder + "/" + kManifestName;
}

std::string recorded_manifest_path(const std::string& output_dir) {
    const std::string flat = output_dir + "/" + kManifestName;
    if (io::is_regular_file(flat) || !io::is_directory(output_dir))
        return flat;
    // Universal checkpoints keep their record in their folder; latest_universal says which one
    // when there are several (it is also what --verify checks, so it may be the damaged file).
    std::vector<std::string> folders;
    for (const std::string& name : io::list_directory(output_dir)) {
        if (io::is_regular_file(output_dir + "/" + name + "/" + kManifestName))
            folders.push_back(name);
    }
    const std::string latest = output_dir + "/" + checkpoint::kLatestUniversal;
    if (io::is_regular_file(latest)) {
        std::string tag = io::read_small_file(latest, 4096);
        while (!tag.empty() && (tag.back() == '\n' || tag.back() == ' ' || tag.back() == '\r'))
            tag.pop_back();
        if (std::find(folders.begin(), folders.end(), tag) != folders.end())
            return output_dir + "/" + tag + "/" + kManifestName;
    }
    return folders.size() == 1 ? output_dir + "/" + folders.front() + "/" + kManifestName : flat;
}

std::vector<std::string> output_subfolders(const run::RunPlan& plan) {
    std::set<std::string> folders;
    for (const run::OutputFileRecord& file : plan.files) {
        const std::string& name = file.name();
        for (auto slash = name.find('/'); slash != std::string::npos;
             slash = name.find('/', slash + 1)) {
            folders.insert(name.substr(0, slash));
        }
    }
    // A parent is a prefix of its children, so it sorts before them.
    return {folders.begin(), folders.end()};
}

std::vector<std::string> unplanned_files_in_output_folder(const run::RunPlan& plan,
                                                          const std::string& output_dir) {
    std::vector<std::string> unplanned;
    if (plan.output_folder.empty())
        return unplanned;
    const std::string folder = output_dir + "/" + plan.output_folder;
    if (!io::is_directory(folder))
        return unplanned;
    for (const std::string& name : io::list_directory(folder)) {
        if (checkpoint::parse_checkpoint_file_name(name).role ==
            checkpoint::CheckpointFileRole::kOptimStates) {
            throw_output_error("'" + folder + "' holds " + name +
                               ": it is a tag folder of a ZeRO checkpoint, not a universal "
                               "checkpoint; refusing to write into it (give another OUT_DIR)");
        }
    }
    std::set<std::string> expected;
    for (const run::OutputFileRecord& file : plan.files)
        expected.insert(file.name());
    for (const std::string& temp : run_temp_names(plan))
        expected.insert(temp);  // the converter's own leftovers, removed before writing
    expected.insert(plan.output_folder + "/" + kManifestName);
    std::vector<std::string> files;
    collect_files(output_dir, plan.output_folder, files);
    for (std::string& path : files) {
        if (expected.count(path) == 0)
            unplanned.push_back(std::move(path));
    }
    std::sort(unplanned.begin(), unplanned.end());
    return unplanned;
}

}  // namespace z2f::driver
