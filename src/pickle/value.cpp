#include "pickle/value.hpp"

namespace z2f::pickle {

std::optional<std::string_view> Value::string() const noexcept {
    if (const Str* str = get<Str>()) {
        return std::string_view(str->text);
    }
    return std::nullopt;
}

const Value* Dict::find(std::string_view key) const noexcept {
    for (auto it = items.rbegin(); it != items.rend(); ++it) {
        if (auto text = it->first.string(); text && *text == key) {
            return &it->second;
        }
    }
    return nullptr;
}

const Global* Instance::global() const noexcept {
    return callable.get<Global>();
}

std::string_view object_type_name(ObjectType type) noexcept {
    switch (type) {
        case ObjectType::kStr:
            return "str";
        case ObjectType::kBytes:
            return "bytes";
        case ObjectType::kBigInt:
            return "int (beyond 64 bits)";
        case ObjectType::kTuple:
            return "tuple";
        case ObjectType::kList:
            return "list";
        case ObjectType::kSet:
            return "set";
        case ObjectType::kDict:
            return "dict";
        case ObjectType::kGlobal:
            return "global";
        case ObjectType::kInstance:
            return "object";
        case ObjectType::kStorage:
            return "torch storage";
        case ObjectType::kTensor:
            return "torch.Tensor";
    }
    return "?";
}

std::string describe_type(const Value& value) {
    switch (value.kind()) {
        case Value::Kind::kNone:
            return "None";
        case Value::Kind::kBool:
            return "bool";
        case Value::Kind::kInt:
            return "int";
        case Value::Kind::kFloat:
            return "float";
        case Value::Kind::kObject:
            break;
    }
    const Object* object = value.as_object();
    if (const auto* dict = value.get<Dict>(); dict != nullptr && dict->ordered) {
        return "OrderedDict";
    }
    if (const auto* global = value.get<Global>()) {
        return "global " + global->module + "." + global->name;
    }
    if (const auto* instance = value.get<Instance>()) {
        if (const Global* cls = instance->global()) {
            return "object of " + cls->module + "." + cls->name;
        }
        return "object";
    }
    return std::string(object_type_name(object->type));
}

}  // namespace z2f::pickle
