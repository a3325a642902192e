#include "checkpoint/routing.hpp"

#include <algorithm>

#include "checkpoint/meta_codec.hpp"
#include "checkpoint/natural_sort.hpp"
#include "checkpoint/sequence_parallel.hpp"
#include "checkpoint/universal_discovery.hpp"
#include "common/errors.hpp"
#include "io/posix_file.hpp"

namespace z2f::checkpoint {
namespace {

enum class RouteKind : std::uint8_t { kDataParallel, kParallel, kUniversal };

}  // namespace

const std::string& DiscoveredCheckpoint::tag_dir() const noexcept {
    if (const auto* grid = std::get_if<FileGrid>(&files))
        return grid->folder.tag_dir;
    if (const auto* universal = std::get_if<UniversalFolder>(&files))
        return universal->files.tag_dir;
    return std::get<CheckpointFiles>(files).tag_dir;
}

const std::string& DiscoveredCheckpoint::checkpoint_dir() const noexcept {
    if (const auto* grid = std::get_if<FileGrid>(&files))
        return grid->folder.checkpoint_dir;
    if (const auto* universal = std::get_if<UniversalFolder>(&files))
        return universal->files.checkpoint_dir;
    return std::get<CheckpointFiles>(files).checkpoint_dir;
}

bool takes_parallel_reader(const std::vector<std::string>& names) {
    // mp ranks that number sequence-parallel ranks: a data-parallel checkpoint, if the files'
    // metadata agrees (assemble_checkpoint_meta checks it).
    if (has_sequence_parallel_names(names))
        return false;
    bool model_file = false;
    bool partitions = false;
    for (const std::string& name : names) {
        CheckpointFileName parsed = parse_checkpoint_file_name(name);
        switch (parsed.role) {
            case CheckpointFileRole::kPipelineLayer:
            case CheckpointFileRole::kExpertModelStates:
            case CheckpointFileRole::kExpertOptimStates:
                return true;
            case CheckpointFileRole::kModelStates:
                model_file = true;
                break;
            case CheckpointFileRole::kOptimStates:
            case CheckpointFileRole::kRankModelStates:
                partitions = true;
                break;
            default:
                continue;
        }
        if (parsed.mp_rank != 0)
            return true;
    }
    return model_file && !partitions;
}

DiscoveredCheckpoint discover_any_checkpoint(const std::string& checkpoint_dir,
                                             const std::string& tag,
                                             const DiscoveryOptions& options) {
    TagFolder folder = resolve_tag_folder(checkpoint_dir, tag, options);
    if (is_universal_tag_dir(folder.tag_dir))
        return {list_universal_tag(folder), std::nullopt};
    std::vector<std::string> names = io::list_directory(folder.tag_dir);
    std::sort(names.begin(), names.end(),
              [](const auto& a, const auto& b) { return natural_less(a, b); });
    if (takes_parallel_reader(names))
        return {discover_file_grid(checkpoint_dir, tag), std::nullopt};
    return {discover_checkpoint(checkpoint_dir, tag, options), std::nullopt};
}

std::string read_tp_rules_file(const std::string& path) {
    if (!io::is_regular_file(path)) {
        throw_usage_error(
            "--tp-rules " + path + ": " +
            (io::path_exists(path) ? io::why_not_regular_file(path) : std::string("no such file")));
    }
    return io::read_small_file(path, std::size_t{16} << 20);
}

std::vector<std::byte> encode_discovered(const DiscoveredCheckpoint& discovered) {
    WireWriter out;
    std::vector<std::byte> body;
    if (const auto* grid = std::get_if<FileGrid>(&discovered.files)) {
        out.enumerator(RouteKind::kParallel);
        body = encode_file_grid(*grid);
    } else if (const auto* universal = std::get_if<UniversalFolder>(&discovered.files)) {
        out.enumerator(RouteKind::kUniversal);
        body = encode_universal_folder(*universal);
    } else {
        out.enumerator(RouteKind::kDataParallel);
        body = encode_files(std::get<CheckpointFiles>(discovered.files));
    }
    out.optional(discovered.tp_rules_text,
                 [](WireWriter& w, const std::string& text) { w.str(text); });
    out.str(std::string_view(reinterpret_cast<const char*>(body.data()), body.size()));
    return out.take();
}

DiscoveredCheckpoint decode_discovered(std::span<const std::byte> bytes) {
    WireReader in(bytes, "discovered checkpoint");
    const RouteKind kind = in.enumerator(RouteKind::kUniversal);
    std::optional<std::string> rules = in.optional([](WireReader& r) { return r.str(); });
    const std::string body = in.str();
    in.expect_end();
    const std::span<const std::byte> span(reinterpret_cast<const std::byte*>(body.data()),
                                          body.size());
    DiscoveredCheckpoint discovered;
    if (kind == RouteKind::kParallel)
        discovered.files = decode_file_grid(span);
    else if (kind == RouteKind::kUniversal)
        discovered.files = decode_universal_folder(span);
    else
        discovered.files = decode_files(span);
    discovered.tp_rules_text = std::move(rules);
    return discovered;
}

}  // namespace z2f::checkpoint
