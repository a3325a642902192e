#include "checkpoint/universal_discovery.hpp"

#include <algorithm>
#include <map>

#include "checkpoint/natural_sort.hpp"
#include "common/errors.hpp"
#include "io/posix_file.hpp"

namespace z2f::checkpoint {

bool is_universal_tag_dir(const std::string& dir) {
    if (!io::is_directory(dir) || !io::is_regular_file(dir + "/zero/optimizer_state.pt")) {
        return false;
    }
    for (const std::string& name : io::list_directory(dir)) {
        if (parse_checkpoint_file_name(name).role == CheckpointFileRole::kOptimStates) {
            return false;  // an ordinary tag folder that happens to hold a zero/ folder
        }
    }
    return true;
}

std::string universal_fp32_path(const UniversalFolder& folder, const std::string& param) {
    return folder.files.tag_dir + "/zero/" + param + "/fp32.pt";
}

UniversalFolder discover_universal_checkpoint(const std::string& checkpoint_dir,
                                              const std::string& tag,
                                              const DiscoveryOptions& options) {
    TagFolder folder = resolve_tag_folder(checkpoint_dir, tag, options);
    if (!is_universal_tag_dir(folder.tag_dir)) {
        throw_input_error(folder.tag_dir,
                          "is no universal checkpoint (zero/optimizer_state.pt is missing, or "
                          "*_optim_states.pt files are beside it)");
    }
    return list_universal_tag(folder);
}

UniversalFolder list_universal_tag(const TagFolder& folder) {
    UniversalFolder universal;
    CheckpointFiles& files = universal.files;
    files.checkpoint_dir = folder.checkpoint_dir;
    files.tag = folder.tag;
    files.tag_dir = folder.tag_dir;
    // ZeRO-3: mp rank -> dp rank -> file (AutoTP's tp x dp grid has several mp ranks).
    std::map<std::uint64_t, std::map<std::uint64_t, std::string>> by_rank;
    std::map<std::uint64_t, std::string> by_mp_rank;
    for (const std::string& name : io::list_directory(files.tag_dir)) {
        const std::string path = files.tag_dir + "/" + name;
        CheckpointFileName parsed = parse_checkpoint_file_name(name);
        switch (parsed.role) {
            case CheckpointFileRole::kModelStates:
            case CheckpointFileRole::kRankModelStates:
                break;
            case CheckpointFileRole::kOther:
                continue;
            default:
                throw_unsupported(path,
                                  "a universal checkpoint holds model-states copies and zero/ "
                                  "only; pipeline layer and expert files are not part of one");
        }
        if (!io::is_regular_file(path)) {
            throw_input_error(path, io::why_not_regular_file(path));
        }
        if (parsed.role == CheckpointFileRole::kModelStates) {
            by_mp_rank.emplace(parsed.mp_rank, path);
            continue;
        }
        if (!by_rank[parsed.mp_rank].emplace(parsed.dp_rank, path).second) {
            throw_input_error(path, "second model-states file for rank " +
                                        std::to_string(parsed.dp_rank) + " of mp rank " +
                                        std::to_string(parsed.mp_rank));
        }
    }
    if (!by_mp_rank.empty() && !by_rank.empty()) {
        throw_input_error(files.tag_dir,
                          "holds both mp_rank_MM_model_states.pt and "
                          "zero_pp_rank_*_model_states.pt: files from two different runs?");
    }
    if (by_mp_rank.empty() && by_rank.empty()) {
        throw_input_error(files.tag_dir,
                          "universal checkpoint without a *_model_states.pt file: parameter "
                          "names and shapes live there (ds_to_universal.py copies them)");
    }
    // ZeRO-3: one file per data-parallel rank; otherwise one per model-parallel rank (a TP rank
    // or pipeline stage; one file for a data-parallel run). A ZeRO-3 run with TP ranks is read
    // like the latter: each TP rank's data-parallel rank 0 file names and shapes its slices.
    auto check_dense = [&](const auto& ranks, const std::string& what) {
        std::uint64_t expected = 0;
        for (const auto& [rank, value] : ranks) {
            if (rank != expected++) {
                throw_input_error(files.tag_dir, "model-states file of " + what + " " +
                                                     std::to_string(expected - 1) + " is missing");
            }
        }
    };
    bool stage3 = false;
    if (!by_rank.empty()) {
        check_dense(by_rank, "mp rank");
        for (const auto& [mp, by_dp] : by_rank) {
            check_dense(by_dp, "rank");
            if (by_dp.size() != by_rank.begin()->second.size()) {
                throw_input_error(files.tag_dir,
                                  "mp rank " + std::to_string(mp) + " has " +
                                      std::to_string(by_dp.size()) +
                                      " ZeRO-3 model-states files, mp rank 0 has " +
                                      std::to_string(by_rank.begin()->second.size()));
            }
        }
        stage3 = by_rank.size() == 1;
        for (const auto& [mp, by_dp] : by_rank) {
            if (stage3) {
                for (const auto& [dp, path] : by_dp)
                    files.model_files.push_back(path);
            } else {
                files.model_files.push_back(by_dp.begin()->second);
            }
        }
    } else {
        check_dense(by_mp_rank, "model-parallel rank");
        for (const auto& [mp, path] : by_mp_rank)
            files.model_files.push_back(path);
    }
    files.per_rank_model_files = stage3;

    const std::string zero = files.tag_dir + "/zero";
    for (const std::string& name : io::list_directory(zero)) {
        if (io::is_directory(zero + "/" + name) &&
            io::is_regular_file(zero + "/" + name + "/fp32.pt")) {
            universal.params.push_back(name);
        }
    }
    std::sort(universal.params.begin(), universal.params.end(),
              [](const auto& a, const auto& b) { return natural_less(a, b); });
    return universal;
}

}  // namespace z2f::checkpoint
