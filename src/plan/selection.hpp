// Choosing and renaming the tensors to write: --include / --exclude (ECMAScript regular
// expressions searched in the consolidated names), --strip-prefix (removes a leading prefix
// such as `_orig_mod.` or `base_model.model.`; each given prefix once, in order) and --untie.
//
// State-dict order is kept. A tied alias whose owner is not selected, and every alias under
// --untie, becomes a tensor of its own that reads the owner's bytes. Two tensors that end up
// with the same name, or a selection that keeps nothing, are usage errors.
#pragma once

#include <string>
#include <vector>

#include "plan/tensor_plan.hpp"

namespace z2f::plan {

struct SelectionOptions {
    std::vector<std::string> include;
    std::vector<std::string> exclude;
    std::vector<std::string> strip_prefixes;
    bool untie = false;
};

TensorPlan select_tensors(const TensorPlan& plan, const SelectionOptions& options);

// The --strip-prefix values that remove nothing from any tensor name (applied in order, as
// select_tensors does): most likely a typo, which the run warns about.
std::vector<std::string> unmatched_prefixes(const TensorPlan& plan,
                                            const SelectionOptions& options);

}  // namespace z2f::plan
