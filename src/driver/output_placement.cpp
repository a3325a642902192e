#include "driver/output_placement.hpp"

#include <filesystem>
#include <vector>

#include "common/errors.hpp"
#include "io/posix_file.hpp"

namespace z2f::driver {
namespace {

bool same_or_inside(const std::string& path, const std::string& folder) {
    if (path == folder)
        return true;
    if (folder == "/")
        return !path.empty() && path.front() == '/';
    return path.size() > folder.size() && path.compare(0, folder.size(), folder) == 0 &&
           path[folder.size()] == '/';
}

}  // namespace

OutputPlacement place_output(const std::string& output_dir, const std::string& checkpoint_arg,
                             const std::string& checkpoint_dir, const std::string& tag_dir) {
    OutputPlacement placement;
    placement.inside_checkpoint =
        same_or_inside(output_dir, checkpoint_arg) || same_or_inside(output_dir, tag_dir);
    placement.checkpoint_folder = output_dir == checkpoint_dir;
    return placement;
}

std::string placement_error(const OutputPlacement& placement, OutputFormat format,
                            const std::string& output_dir) {
    if (!placement.inside_checkpoint)
        return "";
    if (format == OutputFormat::kUniversal) {
        if (placement.checkpoint_folder)
            return "";
        return "OUT_DIR '" + output_dir +
               "' is inside the checkpoint: a universal checkpoint goes either outside it or "
               "into the folder that holds the tag folder and 'latest' (beside the original, as "
               "DeepSpeed does)";
    }
    return "OUT_DIR '" + output_dir +
           "' is the checkpoint folder or inside it: write the output elsewhere";
}

std::string canonical_path(const std::string& path) {
    namespace fs = std::filesystem;
    fs::path full(path);
    if (full.is_relative())
        full = fs::path(io::absolute_path(".")) / full;
    // The longest part that exists is resolved by the file system, the rest lexically.
    std::vector<fs::path> parts(full.begin(), full.end());
    for (std::size_t keep = parts.size(); keep > 0; --keep) {
        fs::path prefix;
        for (std::size_t i = 0; i < keep; ++i)
            prefix /= parts[i];
        if (!io::path_exists(prefix.string()))
            continue;
        fs::path resolved(io::absolute_path(prefix.string()));
        for (std::size_t i = keep; i < parts.size(); ++i)
            resolved /= parts[i];
        std::string text = resolved.lexically_normal().string();
        while (text.size() > 1 && text.back() == '/')
            text.pop_back();
        return text;
    }
    return full.lexically_normal().string();
}

void check_output_placement(const std::string& output_dir, const std::string& checkpoint_arg,
                            const checkpoint::CheckpointFiles& files, OutputFormat format) {
    const std::string out = canonical_path(output_dir);
    const OutputPlacement placement =
        place_output(out, canonical_path(checkpoint_arg), canonical_path(files.checkpoint_dir),
                     canonical_path(files.tag_dir));
    const std::string message = placement_error(placement, format, output_dir);
    if (!message.empty())
        throw_usage_error(message);
}

}  // namespace z2f::driver
