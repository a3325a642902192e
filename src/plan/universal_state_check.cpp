#include "plan/universal_state_check.hpp"

#include "common/errors.hpp"

namespace z2f::plan {

void check_universal_optimizer_state(const checkpoint::CheckpointMeta& meta) {
    for (std::size_t r = 0; r < meta.optim.size(); ++r) {
        const std::vector<checkpoint::OptimizerGroupState>& groups = meta.optim[r].group_states;
        for (std::size_t g = 0; g < groups.size(); ++g) {
            const checkpoint::OptimizerGroupState& state = groups[g];
            if ((state.exp_avg && state.exp_avg_sq) || state.tensor_keys.empty())
                continue;
            std::string keys;
            for (const std::string& key : state.tensor_keys)
                keys += (keys.empty() ? "" : ", ") + key;
            const std::string& path =
                r < meta.files.optim_files.size() ? meta.files.optim_files[r] : meta.files.tag_dir;
            throw_unsupported(
                path, "flat group " + std::to_string(g) + " holds the optimizer state " + keys +
                          ", not Adam's exp_avg and exp_avg_sq: a universal checkpoint carries "
                          "those two moments only (ds_to_universal.py extracts them and "
                          "DeepSpeed's universal loaders read them by name), so this run's "
                          "optimizer state (a non-Adam optimizer, such as Muon) cannot be "
                          "written as one; --format safetensors, torch or hdf5 convert its "
                          "weights");
        }
    }
}

}  // namespace z2f::plan
