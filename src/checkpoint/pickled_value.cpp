#include "checkpoint/pickled_value.hpp"

#include <limits>
#include <optional>
#include <string_view>

#include "common/errors.hpp"

namespace z2f::checkpoint {
namespace {

constexpr std::uint32_t kInProgress = std::numeric_limits<std::uint32_t>::max();

// Paths only name values in messages: bounded, so that long keys shared by many dicts cannot
// make capturing copy them over and over.
constexpr std::size_t kMaxPathBytes = 256;
constexpr std::size_t kMaxKeyInPath = 64;

std::string child_path(const std::string& path, std::string_view suffix) {
    if (path.size() >= kMaxPathBytes) {
        return path;
    }
    return path + std::string(suffix);
}

}  // namespace

const PickledNode& PickledGraph::at(std::uint32_t index) const {
    if (index >= nodes.size()) {
        throw_internal_error("pickled value graph: node " + std::to_string(index) +
                             " out of range");
    }
    return nodes[index];
}

std::uint32_t PickledGraphBuilder::add(PickledNode node) {
    if (graph_.nodes.size() >= kMaxNodes) {
        throw_input_error(file_, "optimizer state values hold more than " +
                                     std::to_string(kMaxNodes) + " objects");
    }
    for (std::uint32_t child : node.children) {
        if (child >= graph_.nodes.size()) {
            throw_internal_error("pickled value graph: a child must precede its parent");
        }
    }
    graph_.nodes.push_back(std::move(node));
    return static_cast<std::uint32_t>(graph_.nodes.size() - 1);
}

std::uint32_t PickledGraphBuilder::unsupported(std::string what, const std::string& path) {
    PickledNode node;
    node.kind = PickledNode::Kind::kUnsupported;
    node.text = std::move(what) + (path.empty() ? "" : " at " + path);
    return add(std::move(node));
}

std::uint32_t PickledGraphBuilder::capture(const pickle::Value& value, const std::string& path) {
    using Kind = PickledNode::Kind;
    PickledNode node;
    switch (value.kind()) {
        case pickle::Value::Kind::kNone:
            return add(node);
        case pickle::Value::Kind::kBool:
            node.kind = Kind::kBool;
            node.integer = value.as_bool() ? 1 : 0;
            return add(std::move(node));
        case pickle::Value::Kind::kInt:
            node.kind = Kind::kInt;
            node.integer = value.as_int();
            return add(std::move(node));
        case pickle::Value::Kind::kFloat:
            node.kind = Kind::kFloat;
            node.real = value.as_float();
            return add(std::move(node));
        case pickle::Value::Kind::kObject:
            break;
    }

    const pickle::Object* object = value.as_object();
    if (auto it = seen_.find(object); it != seen_.end()) {
        if (it->second == kInProgress) {
            return unsupported("a value that contains itself", path);
        }
        return it->second;
    }
    seen_.emplace(object, kInProgress);
    auto child = [&](const pickle::Value& item, const std::string& where) {
        return capture(item, where);
    };
    std::uint32_t index = 0;
    if (const auto* text = value.get<pickle::Str>()) {
        node.kind = Kind::kString;
        node.text = text->text;
        index = add(std::move(node));
    } else if (value.get<pickle::Tuple>() != nullptr || value.get<pickle::List>() != nullptr) {
        const auto& items = static_cast<const pickle::Sequence*>(object)->items;
        node.kind = value.get<pickle::Tuple>() != nullptr ? Kind::kTuple : Kind::kList;
        for (std::size_t i = 0; i < items.size(); ++i) {
            node.children.push_back(
                child(items[i], child_path(path, "[" + std::to_string(i) + "]")));
        }
        index = add(std::move(node));
    } else if (const auto* dict = value.get<pickle::Dict>()) {
        node.kind = dict->ordered ? Kind::kOrderedDict : Kind::kDict;
        for (const auto& [key, item] : dict->items) {
            std::optional<std::string_view> key_text = key.string();
            std::string where =
                key_text && key_text->size() <= kMaxKeyInPath
                    ? child_path(path, (path.empty() ? "" : ".") + std::string(*key_text))
                    : child_path(path, "[key]");
            node.children.push_back(child(key, where));
            node.children.push_back(child(item, where));
        }
        index = add(std::move(node));
    } else if (const auto* global = value.get<pickle::Global>()) {
        node.kind = Kind::kGlobal;
        node.text = global->module;
        node.name = global->name;
        index = add(std::move(node));
    } else if (const auto* instance = value.get<pickle::Instance>()) {
        const pickle::Global* callable = instance->global();
        if (callable == nullptr || instance->args.get<pickle::Tuple>() == nullptr ||
            !instance->kwargs.is_none() || !instance->list_items.empty() ||
            !instance->dict_items.empty()) {
            index = unsupported(pickle::describe_type(value), path);
        } else {
            node.kind = Kind::kObject;
            node.via_newobj = instance->via_newobj;
            node.children.push_back(child(instance->callable, child_path(path, "<class>")));
            node.children.push_back(child(instance->args, child_path(path, "<args>")));
            if (!instance->state.is_none()) {
                node.has_state = true;
                node.children.push_back(child(instance->state, child_path(path, "<state>")));
            }
            index = add(std::move(node));
        }
    } else {
        index = unsupported(pickle::describe_type(value), path);
    }
    seen_[object] = index;
    return index;
}

}  // namespace z2f::checkpoint
