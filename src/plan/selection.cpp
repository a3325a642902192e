#include "plan/selection.hpp"

#include <regex>
#include <unordered_map>

#include "common/errors.hpp"

namespace z2f::plan {
namespace {

std::vector<std::regex> compile(const std::vector<std::string>& patterns, const char* option) {
    std::vector<std::regex> out;
    for (const std::string& pattern : patterns) {
        try {
            out.emplace_back(pattern, std::regex::ECMAScript);
        } catch (const std::regex_error& error) {
            throw_usage_error(std::string("invalid ") + option + " regular expression '" + pattern +
                              "': " + error.what());
        }
    }
    return out;
}

bool any_match(const std::vector<std::regex>& patterns, const std::string& name) {
    for (const std::regex& pattern : patterns) {
        if (std::regex_search(name, pattern)) {
            return true;
        }
    }
    return false;
}

}  // namespace

TensorPlan select_tensors(const TensorPlan& plan, const SelectionOptions& options) {
    std::vector<std::regex> include = compile(options.include, "--include");
    std::vector<std::regex> exclude = compile(options.exclude, "--exclude");

    const std::size_t count = plan.tensors.size();
    std::vector<bool> keep(count);
    for (std::size_t i = 0; i < count; ++i) {
        const std::string& name = plan.tensors[i].name;
        keep[i] = (include.empty() || any_match(include, name)) && !any_match(exclude, name);
    }

    TensorPlan out;
    out.inputs = plan.inputs;
    out.records = plan.records;
    std::vector<std::int64_t> new_index(count, -1);
    for (std::size_t i = 0; i < count; ++i) {
        if (!keep[i])
            continue;
        PlannedTensor tensor = plan.tensors[i];
        if (tensor.is_alias()) {
            auto owner = static_cast<std::size_t>(tensor.alias_of);
            if (options.untie || !keep[owner] || new_index[owner] < 0) {
                // Written as a tensor of its own, from the owner's bytes.
                const PlannedTensor& source = plan.tensors[owner];
                tensor.alias_of = -1;
                tensor.extents = source.extents;
                tensor.pieces = source.pieces;
                tensor.merge = source.merge;
                tensor.source_dtype = source.source_dtype;
                tensor.output_dtype = source.output_dtype;
                tensor.role = source.role;
            } else {
                tensor.alias_of = new_index[owner];
            }
        }
        new_index[i] = static_cast<std::int64_t>(out.tensors.size());
        out.tensors.push_back(std::move(tensor));
    }
    if (out.tensors.empty()) {
        throw_usage_error("no tensor is left after --include/--exclude (the checkpoint has " +
                          std::to_string(count) + " tensors)");
    }

    std::unordered_map<std::string, std::string> renamed_from;
    for (PlannedTensor& tensor : out.tensors) {
        std::string original = tensor.name;
        for (const std::string& prefix : options.strip_prefixes) {
            if (!prefix.empty() && tensor.name.starts_with(prefix)) {
                tensor.name.erase(0, prefix.size());
            }
        }
        if (tensor.name.empty()) {
            throw_usage_error("--strip-prefix turns '" + original + "' into an empty name");
        }
        auto [it, inserted] = renamed_from.emplace(tensor.name, original);
        if (!inserted) {
            throw_usage_error("'" + it->second + "' and '" + original + "' both become '" +
                              tensor.name + "' after --strip-prefix");
        }
    }
    return out;
}

std::vector<std::string> unmatched_prefixes(const TensorPlan& plan,
                                            const SelectionOptions& options) {
    std::vector<bool> used(options.strip_prefixes.size(), false);
    for (const PlannedTensor& tensor : plan.tensors) {
        std::string name = tensor.name;
        for (std::size_t p = 0; p < options.strip_prefixes.size(); ++p) {
            const std::string& prefix = options.strip_prefixes[p];
            if (!prefix.empty() && name.starts_with(prefix)) {
                name.erase(0, prefix.size());
                used[p] = true;
            }
        }
    }
    std::vector<std::string> unmatched;
    for (std::size_t p = 0; p < used.size(); ++p) {
        if (!used[p])
            unmatched.push_back(options.strip_prefixes[p]);
    }
    return unmatched;
}

}  // namespace z2f::plan
