#include "checkpoint/discovery.hpp"

#include <algorithm>
#include <charconv>
#include <map>
#include <optional>

#include "checkpoint/natural_sort.hpp"
#include "checkpoint/sequence_parallel.hpp"
#include "checkpoint/universal_discovery.hpp"
#include "common/errors.hpp"
#include "io/posix_file.hpp"

namespace z2f::checkpoint {
namespace {

constexpr std::size_t kMaxLatestBytes = 4096;

// Consumes a decimal number of at least `min_digits` digits; nullopt when absent or too big.
std::optional<std::uint64_t> take_number(std::string_view& text, std::size_t min_digits) {
    std::size_t digits = 0;
    while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') {
        ++digits;
    }
    if (digits < min_digits) {
        return std::nullopt;
    }
    std::uint64_t value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + digits, value);
    if (ec != std::errc()) {
        return std::nullopt;
    }
    text.remove_prefix(digits);
    return value;
}

bool take(std::string_view& text, std::string_view literal) {
    if (text.substr(0, literal.size()) != literal) {
        return false;
    }
    text.remove_prefix(literal.size());
    return true;
}

bool ends_with(std::string_view text, std::string_view suffix) {
    return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

std::string strip(std::string_view text) {
    const char* space = " \t\r\n\v\f";
    auto begin = text.find_first_not_of(space);
    if (begin == std::string_view::npos) {
        return {};
    }
    auto end = text.find_last_not_of(space);
    return std::string(text.substr(begin, end - begin + 1));
}

bool holds_optim_files(const std::string& dir) {
    for (const auto& name : io::list_directory(dir)) {
        if (parse_checkpoint_file_name(name).role == CheckpointFileRole::kOptimStates) {
            return true;
        }
    }
    return false;
}

bool holds_model_files(const std::string& dir) {
    for (const auto& name : io::list_directory(dir)) {
        if (parse_checkpoint_file_name(name).role == CheckpointFileRole::kModelStates) {
            return true;
        }
    }
    return false;
}

std::string list_tags(const std::string& dir) {
    std::vector<std::string> tags;
    for (const auto& name : io::list_directory(dir)) {
        std::string path = dir + "/" + name;
        if (io::is_directory(path) && holds_optim_files(path)) {
            tags.push_back(name);
        }
    }
    std::sort(tags.begin(), tags.end(),
              [](const auto& a, const auto& b) { return natural_less(a, b); });
    if (tags.empty()) {
        return "none found";
    }
    std::string out;
    for (const auto& tag : tags) {
        out += (out.empty() ? "" : ", ") + tag;
    }
    return out;
}

// The files that make a folder a Hugging Face model: config.json and weights, named.
std::string hf_model_files(const std::string& dir) {
    std::vector<std::string> found;
    for (const auto& name : io::list_directory(dir)) {
        if (name == "config.json" || name.ends_with(".safetensors") ||
            name.ends_with(".safetensors.index.json") ||
            (name.starts_with("pytorch_model") && name.ends_with(".bin"))) {
            found.push_back(name);
        }
    }
    std::sort(found.begin(), found.end());
    std::string text;
    for (std::size_t i = 0; i < found.size() && i < 3; ++i)
        text += (i == 0 ? "" : ", ") + found[i];
    if (found.size() > 3)
        text += ", ...";
    return text;
}

// CKPT_DIR is a tag folder itself and -t names a tag as well, as in `ckpt/global_step2 -t
// global_step1`: say which of the two to drop rather than look for a tag inside a tag.
[[noreturn]] void throw_tag_folder_and_tag(const std::string& root, const std::string& tag) {
    const auto slash = root.find_last_of('/');
    const std::string parent = slash == 0 ? std::string("/") : root.substr(0, slash);
    const std::string folder = root.substr(slash + 1);
    std::string advice;
    if (folder == tag)
        advice = "drop -t " + tag;
    else if (io::is_directory(parent + "/" + tag))
        advice = "give the folder holding both, '" + parent + "' -t " + tag +
                 ", or the tag folder '" + parent + "/" + tag + "' alone";
    else
        advice =
            "give the tag folder alone, or the folder holding the tag folders with -t (tags "
            "in '" +
            parent + "': " + list_tags(parent) + ")";
    throw_usage_error(root + ": CKPT_DIR is a tag folder itself ('" + folder +
                      "'), and a tag was given too (-t " + tag + "): " + advice);
}

void check_tag_text(const std::string& tag, const std::string& where) {
    if (tag.empty() || tag == "." || tag == ".." || tag.find('/') != std::string::npos ||
        tag.find('\0') != std::string::npos) {
        throw_input_error(where, "tag '" + tag + "' is not a folder name");
    }
}

}  // namespace

CheckpointFileName parse_checkpoint_file_name(std::string_view name) {
    CheckpointFileName out;
    const bool optim = ends_with(name, "_optim_states.pt");
    const bool model = ends_with(name, "_model_states.pt");
    if (!optim && !model) {
        // Pipeline layers end in "-model_states.pt", which the *_model_states.pt glob misses.
        std::string_view rest = name;
        std::optional<std::uint64_t> layer;
        std::optional<std::uint64_t> tp;
        if (take(rest, "layer_") && (layer = take_number(rest, 2)) &&
            *layer <= static_cast<std::uint64_t>(INT64_MAX)) {
            if (rest == "-model_states.pt") {
                out.role = CheckpointFileRole::kPipelineLayer;
                out.layer = static_cast<std::int64_t>(*layer);
            } else if (take(rest, "-model_") && (tp = take_number(rest, 2)) &&
                       rest == "-model_states.pt") {
                out.role = CheckpointFileRole::kPipelineLayer;
                out.layer = static_cast<std::int64_t>(*layer);
                out.mp_rank = *tp;
                out.layer_has_tp_rank = true;
            }
        }
        return out;
    }
    out.role = CheckpointFileRole::kUnrecognizedStates;
    std::string_view rest =
        name.substr(0, name.size() - std::string_view("_optim_states.pt").size());
    if (optim) {
        std::string_view body = rest;
        for (std::string_view prefix : {"bf16_", "fp16_"}) {
            if (take(body, prefix)) {
                out.prefix = std::string(prefix);
                break;
            }
        }
        std::optional<std::uint64_t> dp;
        std::optional<std::uint64_t> mp;
        if (take(body, "zero_pp_rank_") && (dp = take_number(body, 1)) && take(body, "_mp_rank_") &&
            (mp = take_number(body, 2)) && body.empty()) {
            out.role = CheckpointFileRole::kOptimStates;
            out.dp_rank = *dp;
            out.mp_rank = *mp;
            return out;
        }
        std::string_view expert = rest;
        if (take(expert, "expp_rank_") && (dp = take_number(expert, 1)) &&
            take(expert, "_mp_rank_") && (mp = take_number(expert, 2)) && expert.empty()) {
            out.role = CheckpointFileRole::kExpertOptimStates;
            out.dp_rank = *dp;
            out.mp_rank = *mp;
        }
        out.prefix.clear();
        return out;
    }
    // *_model_states.pt
    std::string_view body = rest;
    std::optional<std::uint64_t> dp;
    std::optional<std::uint64_t> mp;
    if (take(body, "mp_rank_") && (mp = take_number(body, 2)) && body.empty()) {
        out.role = CheckpointFileRole::kModelStates;
        out.mp_rank = *mp;
        return out;
    }
    body = rest;
    if (take(body, "zero_pp_rank_") && (dp = take_number(body, 1)) && take(body, "_mp_rank_") &&
        (mp = take_number(body, 2)) && body.empty()) {
        out.role = CheckpointFileRole::kRankModelStates;
        out.dp_rank = *dp;
        out.mp_rank = *mp;
        return out;
    }
    body = rest;
    std::optional<std::uint64_t> layer;
    if (take(body, "layer_")) {
        layer = take_number(body, 1);
        if (!layer || *layer > static_cast<std::uint64_t>(INT64_MAX) || !take(body, "_")) {
            return out;
        }
    }
    std::optional<std::uint64_t> expert;
    if (take(body, "expert_") && (expert = take_number(body, 1)) && take(body, "_mp_rank_") &&
        (mp = take_number(body, 2)) && body.empty()) {
        out.role = CheckpointFileRole::kExpertModelStates;
        out.layer = layer ? static_cast<std::int64_t>(*layer) : -1;
        out.expert = *expert;
        out.mp_rank = *mp;
    }
    return out;
}

TagFolder resolve_tag_folder(const std::string& checkpoint_dir, const std::string& tag,
                             const DiscoveryOptions& options) {
    // An argument that names no checkpoint (a mistyped path, a file) is a usage error, like a
    // folder without a checkpoint in it (below); a checkpoint that is there but broken is not.
    if (!io::path_exists(checkpoint_dir)) {
        throw_usage_error(std::string(checkpoint_dir) +
                          ": checkpoint directory does not exist (CKPT_DIR is the folder holding "
                          "'latest', or a tag folder)");
    }
    if (!io::is_directory(checkpoint_dir)) {
        throw_usage_error(std::string(checkpoint_dir) +
                          ": is not a directory; expected a DeepSpeed checkpoint folder (holding "
                          "'latest' or *_optim_states.pt files)");
    }
    TagFolder files;
    const std::string root = io::absolute_path(checkpoint_dir);
    if (!tag.empty()) {
        check_tag_text(tag, root);
        std::string candidate = root + "/" + tag;
        if (!io::is_directory(candidate)) {
            if (holds_optim_files(root) || holds_model_files(root) || is_universal_tag_dir(root))
                throw_tag_folder_and_tag(root, tag);
            throw_usage_error(root + ": tag folder '" + tag +
                              "' does not exist (tags here: " + list_tags(root) + ")");
        }
        files.checkpoint_dir = root;
        files.tag = tag;
        files.tag_dir = candidate;
    } else if (holds_optim_files(root) || holds_model_files(root) || is_universal_tag_dir(root)) {
        // CKPT_DIR is the tag folder itself.
        auto slash = root.find_last_of('/');
        files.checkpoint_dir = slash == 0 ? std::string("/") : root.substr(0, slash);
        files.tag = root.substr(slash + 1);
        files.tag_dir = root;
    } else {
        std::string latest = root + "/latest";
        const std::string latest_universal = root + "/" + kLatestUniversal;
        if (options.from_universal ||
            (!io::path_exists(latest) && io::path_exists(latest_universal))) {
            if (!io::path_exists(latest_universal)) {
                throw_input_error(root,
                                  "no 'latest_universal' file to follow (asked to convert "
                                  "from the universal checkpoint)");
            }
            latest = latest_universal;
        }
        if (!io::path_exists(latest)) {
            std::string tags = list_tags(root);
            if (tags == "none found") {
                // Nothing of a DeepSpeed checkpoint at all: most often a Hugging Face model
                // folder (an earlier conversion's output) given by mistake.
                std::string model = hf_model_files(root);
                throw_usage_error(
                    root +
                    ": not a DeepSpeed checkpoint: looked for a 'latest' file, "
                    "*_optim_states.pt files, and tag folders holding them, and found "
                    "none" +
                    (model.empty() ? std::string()
                                   : "; it holds a Hugging Face model (" + model +
                                         "), which is what zero2fp32-mpi writes, not reads"));
            }
            throw_input_error(root,
                              "no 'latest' file and no *_optim_states.pt files here; give "
                              "--tag (tags here: " +
                                  tags + ")");
        }
        std::string text = strip(io::read_small_file(latest, kMaxLatestBytes));
        check_tag_text(text, latest);
        files.checkpoint_dir = root;
        files.tag = text;
        files.tag_dir = root + "/" + text;
        if (!io::is_directory(files.tag_dir)) {
            throw_input_error(latest, "names tag '" + text + "', but the folder '" + files.tag_dir +
                                          "' does not exist (tags here: " + list_tags(root) + ")");
        }
    }
    return files;
}

CheckpointFiles discover_checkpoint(const std::string& checkpoint_dir, const std::string& tag,
                                    const DiscoveryOptions& options) {
    TagFolder folder = resolve_tag_folder(checkpoint_dir, tag, options);
    CheckpointFiles files;
    files.checkpoint_dir = folder.checkpoint_dir;
    files.tag = folder.tag;
    files.tag_dir = folder.tag_dir;

    if (is_universal_tag_dir(files.tag_dir)) {
        throw_internal_error(files.tag_dir +
                             " is a universal checkpoint: discover_universal_checkpoint reads it");
    }
    std::vector<std::string> names = io::list_directory(files.tag_dir);
    std::sort(names.begin(), names.end(),
              [](const auto& a, const auto& b) { return natural_less(a, b); });
    std::map<std::uint64_t, std::string> optim_by_rank;
    std::map<std::uint64_t, std::string> model_by_rank;
    std::map<std::uint64_t, std::uint64_t> mp_rank_of_optim;
    std::map<std::uint64_t, std::uint64_t> mp_rank_of_model;
    const bool sequence_parallel_names = has_sequence_parallel_names(names);
    std::vector<std::string> shared_model;
    std::string prefix;
    bool first_optim = true;
    for (const std::string& name : names) {
        const std::string path = files.tag_dir + "/" + name;
        CheckpointFileName parsed = parse_checkpoint_file_name(name);
        switch (parsed.role) {
            case CheckpointFileRole::kOther:
                if (name == "offloaded_tensors" && io::is_directory(path)) {
                    files.has_offloaded_tensors = true;
                }
                continue;
            case CheckpointFileRole::kPipelineLayer:
                throw_unsupported(path,
                                  "pipeline-parallel checkpoint (layer_*-model_states.pt): "
                                  "not a data-parallel checkpoint; the parallel reader "
                                  "(discover_file_grid) reads it, as zero2fp32-mpi does");
            case CheckpointFileRole::kExpertModelStates:
            case CheckpointFileRole::kExpertOptimStates:
                throw_unsupported(path,
                                  "Mixture-of-Experts checkpoint (expert files): expert "
                                  "parameters are partitioned over expert-parallel groups, "
                                  "which plain consolidation would mix up; the parallel reader "
                                  "(discover_file_grid) reads it, as zero2fp32-mpi does");
            case CheckpointFileRole::kUnrecognizedStates:
                throw_input_error(path,
                                  "unrecognised checkpoint file name; expected "
                                  "[bf16_]zero_pp_rank_R_mp_rank_MM_optim_states.pt, "
                                  "mp_rank_MM_model_states.pt or "
                                  "zero_pp_rank_R_mp_rank_MM_model_states.pt (remove stray "
                                  "files from the tag folder)");
            default:
                break;
        }
        if (!io::is_regular_file(path)) {
            throw_input_error(path, io::why_not_regular_file(path));
        }
        if (parsed.mp_rank != 0 &&
            (!sequence_parallel_names || parsed.role == CheckpointFileRole::kModelStates)) {
            throw_unsupported(path, "file of model-parallel rank " +
                                        std::to_string(parsed.mp_rank) +
                                        ": a tensor- or pipeline-parallel checkpoint (several "
                                        "mp_rank_XX), not a data-parallel one; the parallel "
                                        "reader (discover_file_grid) reads it, as zero2fp32-mpi "
                                        "does");
        }
        if (parsed.role == CheckpointFileRole::kOptimStates) {
            if (first_optim) {
                prefix = parsed.prefix;
                first_optim = false;
            } else if (parsed.prefix != prefix) {
                throw_input_error(path, "optimizer files mix the name prefixes '" + prefix +
                                            "' and '" + parsed.prefix +
                                            "': files from two different runs?");
            }
            auto [it, inserted] = optim_by_rank.emplace(parsed.dp_rank, path);
            mp_rank_of_optim.emplace(parsed.dp_rank, parsed.mp_rank);
            if (!inserted) {
                throw_input_error(path, "second optimizer file for rank " +
                                            std::to_string(parsed.dp_rank) + " (the first is '" +
                                            it->second + "')");
            }
        } else if (parsed.role == CheckpointFileRole::kRankModelStates) {
            auto [it, inserted] = model_by_rank.emplace(parsed.dp_rank, path);
            mp_rank_of_model.emplace(parsed.dp_rank, parsed.mp_rank);
            if (!inserted) {
                throw_input_error(
                    path, "second model-states file for rank " + std::to_string(parsed.dp_rank));
            }
        } else {
            shared_model.push_back(path);
        }
    }

    if (optim_by_rank.empty()) {
        throw_input_error(files.tag_dir,
                          "no *_optim_states.pt files: not a ZeRO (stage 1-3) "
                          "checkpoint. A ZeRO-0 or plain checkpoint holds its "
                          "weights in mp_rank_00_model_states.pt already");
    }
    if (!shared_model.empty() && !model_by_rank.empty()) {
        throw_input_error(files.tag_dir,
                          "holds both mp_rank_00_model_states.pt (ZeRO stage 0-2) "
                          "and zero_pp_rank_*_model_states.pt (stage 3): files "
                          "from two different runs?");
    }
    if (shared_model.empty() && model_by_rank.empty()) {
        throw_input_error(files.tag_dir,
                          "no *_model_states.pt file: parameter names and shapes "
                          "live there, the checkpoint is incomplete");
    }

    auto in_rank_order = [&](const std::map<std::uint64_t, std::string>& by_rank,
                             const char* what) {
        std::vector<std::string> ordered;
        std::uint64_t expected = 0;
        for (const auto& [rank, path] : by_rank) {
            if (rank != expected) {
                throw_input_error(files.tag_dir,
                                  std::string(what) + " file of rank " + std::to_string(expected) +
                                      " is missing (found " + std::to_string(by_rank.size()) +
                                      " files, ranks up to " +
                                      std::to_string(by_rank.rbegin()->first) + ")");
            }
            ordered.push_back(path);
            ++expected;
        }
        return ordered;
    };
    files.optim_files = in_rank_order(optim_by_rank, "optimizer");
    files.optim_prefix = prefix;
    for (const auto& [rank, mp] : mp_rank_of_optim)
        files.optim_mp_ranks.push_back(mp);
    if (!model_by_rank.empty()) {
        files.model_files = in_rank_order(model_by_rank, "model-states");
        files.per_rank_model_files = true;
        for (const auto& [rank, mp] : mp_rank_of_model)
            files.model_mp_ranks.push_back(mp);
    } else {
        files.model_files = shared_model;
        files.model_mp_ranks.assign(shared_model.size(), 0);
    }
    return files;
}

std::vector<std::string> find_hf_side_files(const std::string& dir) {
    static constexpr std::string_view kExact[] = {"config.json",
                                                  "generation_config.json",
                                                  "special_tokens_map.json",
                                                  "added_tokens.json",
                                                  "vocab.json",
                                                  "vocab.txt",
                                                  "merges.txt",
                                                  "preprocessor_config.json"};
    std::vector<std::string> found;
    if (!io::is_directory(dir)) {
        return found;
    }
    for (const auto& name : io::list_directory(dir)) {
        bool wanted = std::find(std::begin(kExact), std::end(kExact), name) != std::end(kExact) ||
                      name.starts_with("tokenizer") || name.starts_with("chat_template");
        if (wanted && io::is_regular_file(dir + "/" + name)) {
            found.push_back(name);
        }
    }
    std::sort(found.begin(), found.end());
    return found;
}

}  // namespace z2f::checkpoint
