#include "checkpoint/zero0_masters.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <unordered_set>

#include "checkpoint/field.hpp"
#include "common/errors.hpp"
#include "io/dtype_convert.hpp"

namespace z2f::checkpoint {
namespace {

std::string shape_text(const std::vector<std::uint64_t>& shape) {
    std::string text = "(";
    for (std::size_t i = 0; i < shape.size(); ++i)
        text += (i == 0 ? "" : ", ") + std::to_string(shape[i]);
    return text + (shape.size() == 1 ? ",)" : ")");
}

// Whether `master`, from element `element` on, rounds to the first elements of `module` (at most
// kSampleElements of them): what the optimizer wrapper's fp32 -> 16-bit copy makes true of a
// master and its own parameter.
bool sample_rounds_to(const io::File& file, const TensorRef& master, std::uint64_t element,
                      const TensorRef& module) {
    const std::uint64_t count = std::min(module.numel, kSampleElements);
    if (count == 0)
        return true;
    if (element > master.numel || master.numel - element < count)
        return false;
    if (!io::conversion_supported(master.dtype, module.dtype))
        return master.dtype == module.dtype;
    std::vector<std::byte> from(static_cast<std::size_t>(count * dtype_size(master.dtype)));
    std::vector<std::byte> want(static_cast<std::size_t>(count * dtype_size(module.dtype)));
    std::vector<std::byte> got(want.size());
    file.read_exact(master.offset + element * dtype_size(master.dtype), from);
    file.read_exact(module.offset, want);
    io::convert_elements(master.dtype, from, module.dtype, got);
    return got == want;
}

TensorRef floating_master(const Field& field, std::uint32_t file_index) {
    TensorRef ref = field.as_tensor(file_index);
    if (!is_floating(ref.dtype))
        field.fail("a floating-point fp32 master tensor");
    return ref;
}

}  // namespace

std::vector<std::size_t> map_master_tensors(const std::string& path,
                                            const std::vector<std::vector<std::uint64_t>>& shapes,
                                            const std::vector<MasterCandidate>& candidates,
                                            const RoundsTo& rounds_to) {
    // Candidates by shape, in module order; a taken one leaves its list.
    std::map<std::vector<std::uint64_t>, std::vector<std::size_t>> by_shape;
    for (std::size_t c = 0; c < candidates.size(); ++c)
        by_shape[candidates[c].shape].push_back(c);
    std::vector<std::size_t> owner(shapes.size());
    for (std::size_t m = 0; m < shapes.size(); ++m) {
        std::vector<std::size_t>& free = by_shape[shapes[m]];
        const std::string what = "optimizer['fp32_groups']: fp32 master tensor " +
                                 std::to_string(m) + " of shape " + shape_text(shapes[m]);
        if (free.empty()) {
            throw_input_error(path, what +
                                        " has no parameter of that shape left in 'module' to "
                                        "belong to: the masters are not this module's");
        }
        std::optional<std::size_t> chosen;
        if (free.size() == 1) {
            chosen = free.front();
        } else {
            for (std::size_t c : free) {
                if (rounds_to(m, 0, c)) {
                    chosen = c;
                    break;
                }
            }
        }
        if (!chosen) {
            std::string names;
            for (std::size_t i = 0; i < free.size() && i < 4; ++i)
                names += (i == 0 ? "'" : ", '") + candidates[free[i]].name + "'";
            throw_input_error(path, what + " rounds to none of the " + std::to_string(free.size()) +
                                        " parameters of that shape in 'module' (" + names +
                                        (free.size() > 4 ? ", ..." : "") +
                                        "): a 16-bit module copy always equals its master "
                                        "rounded, so these are not this module's masters");
        }
        free.erase(std::find(free.begin(), free.end(), *chosen));
        owner[m] = *chosen;
    }
    return owner;
}

std::vector<std::optional<FlatPlace>> map_flat_masters(
    const std::string& path, const std::vector<std::uint64_t>& lengths,
    const std::vector<MasterCandidate>& candidates, const RoundsTo& rounds_to) {
    std::vector<std::uint64_t> cursor(lengths.size(), 0);
    std::vector<std::optional<FlatPlace>> places(candidates.size());
    for (std::size_t c = 0; c < candidates.size(); ++c) {
        const std::uint64_t numel = candidates[c].numel;
        if (numel == 0)
            continue;  // nothing to take from any group: its module copy is the tensor
        std::vector<std::size_t> groups;
        for (std::size_t g = 0; g < lengths.size(); ++g) {
            if (lengths[g] - cursor[g] >= numel && rounds_to(g, cursor[g], c))
                groups.push_back(g);
        }
        if (groups.size() > 1) {
            throw_input_error(path,
                              "optimizer['fp32_groups_flat']: parameter '" + candidates[c].name +
                                  "' matches the next elements of "
                                  "param groups " +
                                  std::to_string(groups[0]) + " and " + std::to_string(groups[1]) +
                                  ": which group holds its master is not recorded");
        }
        if (groups.empty())
            continue;  // frozen: no group holds it
        places[c] = FlatPlace{groups.front(), cursor[groups.front()]};
        cursor[groups.front()] += numel;
    }
    for (std::size_t g = 0; g < lengths.size(); ++g) {
        if (cursor[g] != lengths[g]) {
            throw_input_error(path,
                              "optimizer['fp32_groups_flat'][" + std::to_string(g) + "] holds " +
                                  std::to_string(lengths[g]) +
                                  " elements, but the module parameters it holds, in module order, "
                                  "account for " +
                                  std::to_string(cursor[g]) +
                                  ": its parameters are not this module's, or not in module order");
        }
    }
    return places;
}

Zero0Masters read_zero0_masters(const container::TorchFile& file, const ModelStatesInfo& model,
                                std::uint32_t file_index) {
    Zero0Masters out;
    Field root(file, file.root(), "");
    if (!root.is_dict())
        return out;
    std::optional<Field> optimizer = root.find("optimizer");
    if (!optimizer || !optimizer->is_dict())
        return out;
    std::optional<Field> groups = optimizer->find("fp32_groups");
    std::optional<Field> flat = optimizer->find("fp32_groups_flat");
    if (groups && groups->is_none())
        groups.reset();
    if (flat && flat->is_none())
        flat.reset();
    if (!groups && !flat)
        return out;
    const std::string& path = file.path();
    if (groups && flat) {
        throw_input_error(path,
                          "optimizer holds both fp32_groups (FP16_UnfusedOptimizer) and "
                          "fp32_groups_flat (FP16_Optimizer)");
    }
    out.key = groups ? "fp32_groups" : "fp32_groups_flat";

    // The parameters: module entries but buffers and tied second names.
    std::unordered_set<std::string> buffers(model.buffer_names.begin(), model.buffer_names.end());
    std::vector<const NamedTensor*> params;
    std::vector<MasterCandidate> candidates;
    std::set<std::tuple<std::uint64_t, std::uint64_t, std::vector<std::uint64_t>>> seen;
    for (const NamedTensor& entry : model.module_tensors) {
        if (buffers.count(entry.name) != 0)
            continue;
        const TensorRef& ref = entry.tensor;
        if (ref.length > 0 && !seen.emplace(ref.offset, ref.length, ref.shape).second)
            continue;  // a second name of the same bytes: a tied weight
        params.push_back(&entry);
        candidates.push_back({entry.name, entry.tensor.shape, entry.tensor.numel});
    }

    std::vector<TensorRef> masters;
    if (groups) {
        std::vector<std::vector<std::uint64_t>> shapes;
        for (const Field& group : groups->elements()) {
            for (const Field& tensor : group.elements()) {
                masters.push_back(floating_master(tensor, file_index));
                shapes.push_back(masters.back().shape);
            }
        }
        out.tensors = masters.size();
        if (!masters.empty() && candidates.empty()) {
            throw_unsupported(path, "optimizer['fp32_groups'] holds " +
                                        std::to_string(masters.size()) +
                                        " fp32 master tensors but 'module' holds no parameter "
                                        "to give them to (a pipeline stage, whose weights are "
                                        "in its layer files): mapping the masters of a 16-bit "
                                        "pipeline without ZeRO is not supported");
        }
        const std::vector<std::size_t> owner = map_master_tensors(
            path, shapes, candidates, [&](std::size_t m, std::uint64_t element, std::size_t c) {
                return sample_rounds_to(file.file(), masters[m], element, params[c]->tensor);
            });
        std::vector<std::optional<std::size_t>> master_of(candidates.size());
        for (std::size_t m = 0; m < owner.size(); ++m)
            master_of[owner[m]] = m;
        for (std::size_t c = 0; c < candidates.size(); ++c) {
            if (master_of[c])
                out.masters.push_back({candidates[c].name, masters[*master_of[c]]});
        }
        return out;
    }

    std::vector<std::uint64_t> lengths;
    for (const Field& group : flat->elements()) {
        masters.push_back(floating_master(group, file_index));
        if (masters.back().shape.size() > 1)
            group.fail("a 1-D flat group of fp32 masters");
        lengths.push_back(masters.back().numel);
    }
    out.tensors = masters.size();
    if (!masters.empty() && candidates.empty()) {
        throw_unsupported(path, "optimizer['fp32_groups_flat'] holds " +
                                    std::to_string(masters.size()) +
                                    " flat groups of fp32 masters but 'module' holds no "
                                    "parameter to give them to (a pipeline stage, whose weights "
                                    "are in its layer files): mapping the masters of a 16-bit "
                                    "pipeline without ZeRO is not supported");
    }
    const std::vector<std::optional<FlatPlace>> places = map_flat_masters(
        path, lengths, candidates, [&](std::size_t g, std::uint64_t element, std::size_t c) {
            return sample_rounds_to(file.file(), masters[g], element, params[c]->tensor);
        });
    for (std::size_t c = 0; c < candidates.size(); ++c) {
        if (!places[c])
            continue;
        const TensorRef& group = masters[places[c]->group];
        TensorRef slice;
        slice.file = group.file;
        slice.dtype = group.dtype;
        slice.shape = candidates[c].shape;
        slice.numel = candidates[c].numel;
        slice.offset = group.offset + places[c]->element * dtype_size(group.dtype);
        slice.length = slice.numel * dtype_size(group.dtype);
        out.masters.push_back({candidates[c].name, std::move(slice)});
    }
    return out;
}

}  // namespace z2f::checkpoint
