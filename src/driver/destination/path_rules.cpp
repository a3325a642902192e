#include "driver/destination/path_rules.hpp"

#include <vector>

#include "common/errors.hpp"
#include "io/posix_file.hpp"

namespace z2f::driver {
namespace {

std::vector<std::string> components(const std::string& path) {
    std::vector<std::string> parts;
    std::size_t begin = 0;
    while (begin <= path.size()) {
        std::size_t end = path.find('/', begin);
        if (end == std::string::npos)
            end = path.size();
        if (end > begin)
            parts.push_back(path.substr(begin, end - begin));
        begin = end + 1;
    }
    return parts;
}

std::string parent_of(const std::string& absolute) {
    auto slash = absolute.find_last_of('/');
    return slash == 0 || slash == std::string::npos ? "/" : absolute.substr(0, slash);
}

std::string child_of(const std::string& dir, const std::string& name) {
    return dir == "/" ? "/" + name : dir + "/" + name;
}

bool is_within(const std::string& path, const std::string& dir) {
    return path == dir || dir == "/" || path.starts_with(dir + "/");
}

bool has_file_extension(const std::string& path) {
    auto slash = path.find_last_of('/');
    std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
    for (const char* extension : {".bin", ".safetensors", ".pt", ".pth", ".h5"}) {
        if (name.size() > std::string(extension).size() && name.ends_with(extension))
            return true;
    }
    return false;
}

std::string name_of(const std::string& absolute) {
    return absolute.substr(absolute.find_last_of('/') + 1);
}

// A folder for the outputs to suggest in a message: `model` beside OUT_DIR as written, or, when
// that is in the checkpoint (zero_to_fp32's habit of running from inside it), `<name>-hf` beside
// the checkpoint's root, which no rule below refuses.
std::string suggested_folder(const std::string& resolved_out, const std::string& checkpoint,
                             const std::string& tag_dir, const std::string& root) {
    const std::string outermost = !root.empty() && is_within(checkpoint, root) ? root : checkpoint;
    const std::string beside = child_of(parent_of(resolved_out), "model");
    if (!is_within(beside, outermost) && !is_within(beside, tag_dir))
        return beside;
    return child_of(parent_of(outermost), name_of(outermost) + "-hf");
}

}  // namespace

std::string resolve_path(const std::string& path) {
    std::string resolved = path.starts_with("/") ? "/" : io::absolute_path(".");
    bool existing = true;
    for (const std::string& part : components(path)) {
        if (part == ".")
            continue;
        if (part == "..") {
            // Within the existing part realpath has already resolved the links, so the parent
            // of the text is the real parent; beyond it nothing exists to resolve.
            resolved = parent_of(resolved);
            continue;
        }
        std::string next = child_of(resolved, part);
        if (existing && io::path_exists(next)) {
            try {
                resolved = io::absolute_path(next);
                continue;
            } catch (const Error&) {
                // A dangling symbolic link: take the rest as written.
            }
        }
        existing = false;
        resolved = next;
    }
    return resolved;
}

void check_output_path(const OutputPaths& paths) {
    const std::string& out = paths.output_dir;
    if (out.empty())
        throw_usage_error("OUT_DIR is empty");
    if (io::path_exists(out) && !io::is_directory(out)) {
        throw_usage_error("OUT_DIR '" + out +
                          "' exists and is not a directory: OUT_DIR is the folder the output "
                          "files go into (it is created if missing)");
    }
    const std::string resolved = resolve_path(out);
    const std::string checkpoint = resolve_path(paths.checkpoint_dir);
    const std::string tag_dir = resolve_path(paths.tag_dir);
    const std::string root =
        paths.checkpoint_folder.empty() ? std::string() : resolve_path(paths.checkpoint_folder);
    if (!io::path_exists(out) && has_file_extension(out)) {
        throw_usage_error("OUT_DIR '" + out +
                          "' looks like a file name, but OUT_DIR is a folder: the outputs go "
                          "into it as model.safetensors (or pytorch_model.bin with --format "
                          "torch), sharded with an index when large; give the folder, e.g. '" +
                          suggested_folder(resolved, checkpoint, tag_dir, root) + "'");
    }
    const bool inside = is_within(resolved, checkpoint) || is_within(resolved, tag_dir);
    if (inside && paths.format == OutputFormat::kUniversal) {
        if (!root.empty() && resolved == root)
            return;  // beside the original, as DeepSpeed puts it
        throw_usage_error("OUT_DIR '" + out +
                          "' is inside the checkpoint: a universal checkpoint goes either outside "
                          "it or into the folder that holds the tag folder and 'latest' (beside "
                          "the original, as DeepSpeed does)");
    }
    // The folder holding the tag folder (`ckpt` of `ckpt/global_step2`): universal output's own
    // place; Hugging Face files and their run record there would sit among the checkpoint's.
    if (!root.empty() && resolved == root && paths.format != OutputFormat::kUniversal) {
        throw_usage_error("OUT_DIR '" + out + "' is the checkpoint's root '" + root +
                          "', the folder holding the tag folder '" + name_of(tag_dir) +
                          "': the outputs would be mixed into the checkpoint (only --format "
                          "universal writes there, beside the original); give a folder outside "
                          "it, e.g. '" +
                          suggested_folder(resolved, checkpoint, tag_dir, root) + "'");
    }
    for (const std::string& folder : {checkpoint, tag_dir}) {
        if (is_within(resolved, folder)) {
            throw_usage_error(
                "OUT_DIR '" + out + "' is " +
                (resolved == folder ? std::string("the checkpoint folder")
                                    : "inside the checkpoint folder") +
                " '" + folder +
                "': the outputs would be mixed into the checkpoint; give a folder outside it, "
                "e.g. '" +
                suggested_folder(resolved, checkpoint, tag_dir, root) + "'");
        }
    }
}

}  // namespace z2f::driver
