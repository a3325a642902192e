#include "checkpoint/file_grid.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "checkpoint/natural_sort.hpp"
#include "common/errors.hpp"
#include "io/posix_file.hpp"

namespace z2f::checkpoint {
namespace {

std::string two_digits(std::uint64_t value) {
    std::string text = std::to_string(value);
    return text.size() < 2 ? "0" + text : text;
}

std::string model_file_name(std::uint64_t mp) {
    return "mp_rank_" + two_digits(mp) + "_model_states.pt";
}

// Keys 0..n-1 in order, or an error naming the first missing one (`describe(k)` names it).
template <typename Value, typename Describe>
std::vector<Value> dense(const std::map<std::uint64_t, Value>& by_key, const std::string& tag_dir,
                         Describe&& describe) {
    std::vector<Value> out;
    std::uint64_t expected = 0;
    for (const auto& [key, value] : by_key) {
        if (key != expected) {
            throw_input_error(tag_dir, describe(expected) + " is missing (found " +
                                           std::to_string(by_key.size()) + ", numbered up to " +
                                           std::to_string(by_key.rbegin()->first) + ")");
        }
        out.push_back(value);
        ++expected;
    }
    return out;
}

}  // namespace

FileGrid file_grid_from_names(const std::string& tag_dir, const std::vector<std::string>& names) {
    FileGrid grid;
    std::map<std::uint64_t, std::string> models;
    std::map<std::uint64_t, std::map<std::uint64_t, std::string>> optims;
    std::map<std::uint64_t, std::map<std::uint64_t, std::string>> zero3_models;
    std::map<std::uint64_t, std::map<std::uint64_t, std::string>> layers;
    std::map<std::tuple<std::int64_t, std::uint64_t, std::uint64_t>, std::string> experts;
    std::map<std::uint64_t, std::map<std::uint64_t, std::string>> expert_optims;
    bool saw_layer_plain = false;
    bool saw_layer_tp = false;
    bool saw_optim = false;

    auto insert_once = [&](auto& map, auto key, const std::string& path, const char* what) {
        auto [it, inserted] = map.emplace(key, path);
        if (!inserted) {
            throw_input_error(
                path, std::string("second ") + what + " (the first is '" + it->second + "')");
        }
    };

    for (const std::string& name : names) {
        const std::string path = tag_dir + "/" + name;
        CheckpointFileName parsed = parse_checkpoint_file_name(name);
        switch (parsed.role) {
            case CheckpointFileRole::kOther:
                if (name == "offloaded_tensors") {
                    grid.has_offloaded_tensors = true;
                }
                break;
            case CheckpointFileRole::kUnrecognizedStates:
                throw_input_error(path,
                                  "unrecognised checkpoint file name; expected one of "
                                  "mp_rank_MM_model_states.pt, "
                                  "[bf16_]zero_pp_rank_D_mp_rank_MM_optim_states.pt, "
                                  "zero_pp_rank_D_mp_rank_MM_model_states.pt, "
                                  "layer_LL[-model_TT]-model_states.pt, "
                                  "layer_L_expert_E_mp_rank_MM_model_states.pt or "
                                  "expp_rank_R_mp_rank_MM_optim_states.pt (remove stray files "
                                  "from the tag folder)");
            case CheckpointFileRole::kModelStates:
                insert_once(models, parsed.mp_rank, path, "model-states file of that mp rank");
                break;
            case CheckpointFileRole::kOptimStates:
                if (!saw_optim) {
                    grid.optim_prefix = parsed.prefix;
                    saw_optim = true;
                } else if (parsed.prefix != grid.optim_prefix) {
                    throw_input_error(path, "optimizer files mix the name prefixes '" +
                                                grid.optim_prefix + "' and '" + parsed.prefix +
                                                "': files from two different runs?");
                }
                insert_once(optims[parsed.mp_rank], parsed.dp_rank, path,
                            "optimizer file of that (dp, mp) rank");
                break;
            case CheckpointFileRole::kRankModelStates:
                insert_once(zero3_models[parsed.mp_rank], parsed.dp_rank, path,
                            "ZeRO-3 model file of that (dp, mp) rank");
                break;
            case CheckpointFileRole::kPipelineLayer:
                (parsed.layer_has_tp_rank ? saw_layer_tp : saw_layer_plain) = true;
                insert_once(layers[static_cast<std::uint64_t>(parsed.layer)], parsed.mp_rank, path,
                            "layer file of that (layer, TP rank)");
                break;
            case CheckpointFileRole::kExpertModelStates:
                insert_once(experts, std::make_tuple(parsed.layer, parsed.expert, parsed.mp_rank),
                            path, "expert file of that (layer, expert, mp rank)");
                break;
            case CheckpointFileRole::kExpertOptimStates:
                insert_once(expert_optims[parsed.mp_rank], parsed.dp_rank, path,
                            "expert optimizer file of that (ep, mp) rank");
                break;
        }
    }

    if (models.empty()) {
        if (zero3_models.empty()) {
            throw_input_error(tag_dir,
                              "no mp_rank_MM_model_states.pt file: parameter names, shapes and "
                              "(without ZeRO) the weights live there, the checkpoint is "
                              "incomplete");
        }
        // ZeRO-3: every TP rank MM has one model file per data-parallel rank D.
        std::map<std::uint64_t, std::vector<std::string>> by_mp;
        for (const auto& [mp, by_dp] : zero3_models) {
            const std::uint64_t mp_rank = mp;
            by_mp[mp] = dense(by_dp, tag_dir, [&](std::uint64_t d) {
                return "zero_pp_rank_" + std::to_string(d) + "_mp_rank_" + two_digits(mp_rank) +
                       "_model_states.pt";
            });
            if (by_mp[mp].size() != by_mp.begin()->second.size()) {
                throw_input_error(tag_dir, "mp rank " + two_digits(mp) + " has " +
                                               std::to_string(by_mp[mp].size()) +
                                               " ZeRO-3 model files, mp rank " +
                                               two_digits(by_mp.begin()->first) + " has " +
                                               std::to_string(by_mp.begin()->second.size()) +
                                               ": every TP rank saves one per data-parallel rank");
            }
        }
        grid.zero3_model_files = dense(by_mp, tag_dir, [](std::uint64_t mp) {
            return "zero_pp_rank_0_mp_rank_" + two_digits(mp) + "_model_states.pt";
        });
        for (const auto& files : grid.zero3_model_files)
            models.emplace(models.size(), files.front());
    } else if (!zero3_models.empty()) {
        throw_input_error(tag_dir,
                          "holds both mp_rank_MM_model_states.pt (ZeRO stage 0-2) and "
                          "zero_pp_rank_*_model_states.pt (stage 3): files from two different "
                          "runs?");
    }
    grid.model_files = dense(models, tag_dir, model_file_name);
    const std::uint64_t mp_size = grid.model_files.size();

    // Optimizer files: the same data-parallel ranks 0..D-1 for every model-parallel rank.
    if (!optims.empty()) {
        std::size_t dp_size = 0;
        for (const auto& [mp, by_dp] : optims) {
            if (mp >= mp_size) {
                throw_input_error(
                    tag_dir, "optimizer files of mp rank " + two_digits(mp) + " but no " +
                                 (grid.is_zero3() ? "zero_pp_rank_0_mp_rank_" + two_digits(mp) +
                                                        "_model_states.pt"
                                                  : model_file_name(mp)));
            }
            // A named copy: lambdas cannot capture structured bindings before C++20 P1091
            // reached every compiler (clang 14 refuses it).
            const std::uint64_t mp_rank = mp;
            std::string prefix = grid.optim_prefix;
            std::vector<std::string> files = dense(by_dp, tag_dir, [&](std::uint64_t d) {
                return prefix + "zero_pp_rank_" + std::to_string(d) + "_mp_rank_" +
                       two_digits(mp_rank) + "_optim_states.pt";
            });
            if (dp_size == 0) {
                dp_size = files.size();
            } else if (files.size() != dp_size) {
                throw_input_error(
                    tag_dir, "mp rank " + two_digits(mp) + " has " + std::to_string(files.size()) +
                                 " optimizer files, mp rank " + two_digits(optims.begin()->first) +
                                 " has " + std::to_string(dp_size) +
                                 ": every model-parallel rank saves one per "
                                 "data-parallel rank");
            }
        }
        if (grid.is_zero3() && dp_size != grid.zero3_model_files.front().size()) {
            throw_input_error(tag_dir, std::to_string(dp_size) +
                                           " optimizer files per mp rank but " +
                                           std::to_string(grid.zero3_model_files.front().size()) +
                                           " ZeRO-3 model files: ZeRO-3 saves both per "
                                           "data-parallel rank");
        }
        for (std::uint64_t mp = 0; mp < mp_size; ++mp) {
            auto it = optims.find(mp);
            if (it == optims.end()) {
                throw_input_error(tag_dir, "no optimizer files for mp rank " + two_digits(mp) +
                                               " (expected " + grid.optim_prefix +
                                               "zero_pp_rank_0_mp_rank_" + two_digits(mp) +
                                               "_optim_states.pt and its data-parallel peers)");
            }
            std::vector<std::string> files;
            for (const auto& [d, path] : it->second)
                files.push_back(path);
            grid.optim_files.push_back(std::move(files));
        }
    }

    // Layer files: one form, and the same TP ranks 0..T-1 for every layer.
    if (saw_layer_plain && saw_layer_tp) {
        throw_input_error(tag_dir,
                          "holds both layer_LL-model_states.pt and layer_LL-model_TT-"
                          "model_states.pt files: files from two different runs?");
    }
    grid.layer_files_have_tp_rank = saw_layer_tp;
    std::size_t layer_tp = 0;
    for (const auto& [layer, by_tp] : layers) {
        std::uint64_t l = layer;
        std::vector<std::string> files = dense(by_tp, tag_dir, [&](std::uint64_t t) {
            return "layer_" + two_digits(l) + "-model_" + two_digits(t) + "-model_states.pt";
        });
        if (layer_tp == 0) {
            layer_tp = files.size();
        } else if (files.size() != layer_tp) {
            throw_input_error(
                tag_dir, "layer " + two_digits(layer) + " has " + std::to_string(files.size()) +
                             " tensor-parallel files, layer " + two_digits(layers.begin()->first) +
                             " has " + std::to_string(layer_tp));
        }
        for (std::size_t t = 0; t < files.size(); ++t) {
            grid.layer_files.push_back({layer, t, files[t]});
        }
    }
    if (!grid.layer_files.empty()) {
        if (grid.is_zero3()) {
            throw_unsupported(tag_dir,
                              "pipeline layer files with ZeRO-3 model files: DeepSpeed does not "
                              "combine pipeline parallelism with ZeRO-3");
        }
        grid.tp_degree = static_cast<std::uint32_t>(layer_tp);
        if (mp_size % layer_tp != 0) {
            throw_input_error(tag_dir, std::to_string(mp_size) +
                                           " mp_rank model files cannot hold a pipeline with " +
                                           std::to_string(layer_tp) +
                                           " tensor-parallel ranks per layer (the count must be "
                                           "stages x TP)");
        }
        grid.pp_degree = static_cast<std::uint32_t>(mp_size / layer_tp);
    } else {
        grid.tp_degree = static_cast<std::uint32_t>(std::max<std::uint64_t>(mp_size, 1));
        grid.pp_degree = 1;
    }

    // Expert files: per MoE layer, global experts 0..E-1, each for every mp rank.
    std::map<std::int64_t, std::map<std::uint64_t, std::set<std::uint64_t>>> expert_grid;
    for (const auto& [key, path] : experts) {
        auto [layer, expert, mp] = key;
        expert_grid[layer][expert].insert(mp);
        grid.expert_files.push_back({layer, expert, mp, path});
    }
    if (grid.is_zero3() && !grid.expert_files.empty()) {
        throw_unsupported(tag_dir,
                          "MoE expert files with ZeRO-3 model files: ZeRO-3 keeps experts in "
                          "its partitions (AutoEP's partition-native format writes no expert "
                          "files); files of two runs, or a layout this tool does not read");
    }
    if (expert_grid.size() > 1 && expert_grid.count(-1) != 0) {
        throw_input_error(tag_dir,
                          "holds both expert_E_mp_rank_MM and layer_L_expert_E_mp_rank_MM files: "
                          "files from two different runs?");
    }
    for (const auto& [layer, by_expert] : expert_grid) {
        std::map<std::uint64_t, int> present;
        for (const auto& [expert, mps] : by_expert) {
            present.emplace(expert, 0);
            for (std::uint64_t mp = 0; mp < std::max<std::uint64_t>(mp_size, 1); ++mp) {
                if (mps.count(mp) == 0) {
                    throw_input_error(tag_dir, "expert " + std::to_string(expert) +
                                                   " of MoE layer " + std::to_string(layer) +
                                                   " has no file for mp rank " + two_digits(mp));
                }
            }
        }
        std::int64_t l = layer;
        dense(present, tag_dir, [&](std::uint64_t e) {
            return (l >= 0 ? "layer_" + std::to_string(l) + "_" : std::string()) + "expert_" +
                   std::to_string(e) + "_mp_rank_00_model_states.pt";
        });
    }
    for (const auto& [mp, by_rank] : expert_optims) {
        if (mp >= std::max<std::uint64_t>(mp_size, 1)) {
            throw_input_error(tag_dir, "expert optimizer files of mp rank " + two_digits(mp) +
                                           " but no " + model_file_name(mp));
        }
        std::uint64_t m = mp;
        grid.expert_optim_files.push_back(dense(by_rank, tag_dir, [&](std::uint64_t r) {
            return "expp_rank_" + std::to_string(r) + "_mp_rank_" + two_digits(m) +
                   "_optim_states.pt";
        }));
    }
    if (!grid.expert_optim_files.empty() && grid.expert_files.empty()) {
        throw_input_error(tag_dir,
                          "expp_rank_R optimizer files but no layer_L_expert_E model files: the "
                          "expert weights are missing");
    }
    return grid;
}

FileGrid discover_file_grid(const std::string& checkpoint_dir, const std::string& tag) {
    TagFolder folder = resolve_tag_folder(checkpoint_dir, tag);
    std::vector<std::string> names = io::list_directory(folder.tag_dir);
    std::sort(names.begin(), names.end(),
              [](const auto& a, const auto& b) { return natural_less(a, b); });
    FileGrid grid = file_grid_from_names(folder.tag_dir, names);
    grid.has_offloaded_tensors =
        grid.has_offloaded_tensors && io::is_directory(folder.tag_dir + "/offloaded_tensors");
    for (const std::string& name : names) {
        const std::string path = folder.tag_dir + "/" + name;
        if (parse_checkpoint_file_name(name).role != CheckpointFileRole::kOther &&
            !io::is_regular_file(path)) {
            throw_input_error(path, io::why_not_regular_file(path));
        }
    }
    grid.folder = std::move(folder);
    return grid;
}

}  // namespace z2f::checkpoint
