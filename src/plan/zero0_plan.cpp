#include "plan/zero0_plan.hpp"

#include <map>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

namespace z2f::plan {

std::vector<Zero0Param> zero0_parameters(const checkpoint::ModelStatesInfo& model,
                                         const checkpoint::Zero0Masters& masters) {
    std::unordered_map<std::string, const checkpoint::TensorRef*> master_of;
    for (const checkpoint::NamedTensor& master : masters.masters)
        master_of.emplace(master.name, &master.tensor);
    const std::unordered_set<std::string> buffers(model.buffer_names.begin(),
                                                  model.buffer_names.end());
    // The first name of each module byte range, as zero0_masters.hpp tells tied names apart.
    std::map<std::tuple<std::uint64_t, std::uint64_t, std::vector<std::uint64_t>>, std::string>
        first_name;
    std::vector<Zero0Param> params;
    for (const checkpoint::NamedTensor& entry : model.module_tensors) {
        if (buffers.count(entry.name) != 0)
            continue;
        const checkpoint::TensorRef& ref = entry.tensor;
        if (ref.length > 0) {
            auto [it, first] =
                first_name.emplace(std::make_tuple(ref.offset, ref.length, ref.shape), entry.name);
            if (!first) {
                params.push_back({entry.name, ref, TensorRole::kAlias, it->second});
                continue;
            }
        }
        if (auto master = master_of.find(entry.name); master != master_of.end())
            params.push_back({entry.name, *master->second, TensorRole::kTrainable, {}});
        else
            params.push_back({entry.name, ref, TensorRole::kFrozen, {}});
    }
    return params;
}

}  // namespace z2f::plan
