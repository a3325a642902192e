#include "pickle/printer.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <unordered_set>

namespace z2f::pickle {
namespace {

std::string quote(std::string_view text, std::uint32_t limit) {
    std::string out = "'";
    std::size_t shown = std::min<std::size_t>(text.size(), limit);
    for (std::size_t i = 0; i < shown; ++i) {
        auto c = static_cast<unsigned char>(text[i]);
        if (c == '\'' || c == '\\') {
            out += '\\';
            out += static_cast<char>(c);
        } else if (c < 0x20 || c == 0x7F) {
            char buffer[8];
            std::snprintf(buffer, sizeof buffer, "\\x%02x", c);
            out += buffer;
        } else {
            out += static_cast<char>(c);
        }
    }
    out += "'";
    if (shown < text.size()) {
        out += "... (" + std::to_string(text.size()) + " bytes)";
    }
    return out;
}

std::string join_dims(const auto& dims) {
    std::string out = "[";
    for (std::size_t i = 0; i < dims.size(); ++i) {
        out += (i == 0 ? "" : ", ") + std::to_string(dims[i]);
    }
    return out + "]";
}

std::string format_float(double value) {
    if (std::isnan(value))
        return "nan";
    if (std::isinf(value))
        return value > 0 ? "inf" : "-inf";
    char buffer[32];
    auto result = std::to_chars(buffer, buffer + sizeof buffer, value);  // shortest round trip
    return std::string(buffer, result.ptr);
}

class Printer {
  public:
    Printer(std::ostream& out, const PrintOptions& options)
        : out_(out), options_(options), max_depth_(std::min(options.max_depth, kMaxPrintDepth)) {}

    void print(const Value& value) {
        node(value, 0, "");
        if (truncated_) {
            out_ << "... (output truncated after " << options_.max_lines << " lines)\n";
        }
    }

  private:
    bool line(std::uint32_t depth, const std::string& text) {
        if (lines_ >= options_.max_lines) {
            truncated_ = true;
            return false;
        }
        ++lines_;
        out_ << std::string(2 * depth, ' ') << text << '\n';
        return true;
    }

    std::string scalar(const Value& value) {
        switch (value.kind()) {
            case Value::Kind::kNone:
                return "None";
            case Value::Kind::kBool:
                return value.as_bool() ? "True" : "False";
            case Value::Kind::kInt:
                return std::to_string(value.as_int());
            case Value::Kind::kFloat:
                return format_float(value.as_float());
            case Value::Kind::kObject:
                break;
        }
        const Object* object = value.as_object();
        switch (object->type) {
            case ObjectType::kStr:
                return quote(static_cast<const Str*>(object)->text, options_.max_string);
            case ObjectType::kBytes:
                return "b" + quote(static_cast<const Bytes*>(object)->data, options_.max_string);
            case ObjectType::kBigInt: {
                const auto* big = static_cast<const BigInt*>(object);
                return big->decimal.empty()
                           ? "<int of " + std::to_string(big->le_bytes.size()) + " bytes>"
                           : big->decimal;
            }
            case ObjectType::kGlobal: {
                const auto* global = static_cast<const Global*>(object);
                return "<global " + global->module + "." + global->name + ">";
            }
            case ObjectType::kStorage: {
                const auto* storage = static_cast<const Storage*>(object);
                return "<storage data/" + storage->key + " " +
                       std::string(storage->dtype ? dtype_display_name(*storage->dtype) : "bytes") +
                       " x" + std::to_string(storage->numel) + " on " + storage->location + ">";
            }
            case ObjectType::kTensor: {
                const auto* tensor = static_cast<const Tensor*>(object);
                std::string text = tensor_summary(*tensor);
                if (options_.describe_tensor) {
                    std::string extra = options_.describe_tensor(*tensor);
                    if (!extra.empty()) {
                        text += " " + extra;
                    }
                }
                return text;
            }
            default:
                return {};
        }
    }

    bool is_container(const Value& value) {
        const Object* object = value.as_object();
        if (object == nullptr)
            return false;
        switch (object->type) {
            case ObjectType::kTuple:
            case ObjectType::kList:
            case ObjectType::kSet:
            case ObjectType::kDict:
            case ObjectType::kInstance:
                return true;
            default:
                return false;
        }
    }

    void node(const Value& value, std::uint32_t depth, const std::string& label) {
        if (!is_container(value)) {
            line(depth, label + scalar(value));
            return;
        }
        const Object* object = value.as_object();
        if (on_path_.count(object) != 0) {
            line(depth, label + "<cycle: " + describe_type(value) + " already being printed>");
            return;
        }
        if (depth >= max_depth_) {
            line(depth, label + "<" + describe_type(value) + ": nesting too deep to print>");
            return;
        }
        on_path_.insert(object);
        switch (object->type) {
            case ObjectType::kTuple:
            case ObjectType::kList:
            case ObjectType::kSet: {
                const auto& items = static_cast<const Sequence*>(object)->items;
                const char* open = object->type == ObjectType::kTuple  ? "("
                                   : object->type == ObjectType::kList ? "["
                                                                       : "{";
                if (items.empty()) {
                    line(depth, label + std::string(describe_type(value)) + " " + open +
                                    (object->type == ObjectType::kTuple  ? ")"
                                     : object->type == ObjectType::kList ? "]"
                                                                         : "}"));
                    break;
                }
                if (!line(depth,
                          label + describe_type(value) + " of " + std::to_string(items.size()))) {
                    break;
                }
                for (std::size_t i = 0; i < items.size(); ++i) {
                    if (lines_ >= options_.max_lines) {
                        truncated_ = true;
                        break;
                    }
                    node(items[i], depth + 1, "[" + std::to_string(i) + "] ");
                }
                break;
            }
            case ObjectType::kDict: {
                const auto* dict = static_cast<const Dict*>(object);
                if (!line(depth, label + describe_type(value) + " of " +
                                     std::to_string(dict->items.size()))) {
                    break;
                }
                for (const auto& [key, item] : dict->items) {
                    if (lines_ >= options_.max_lines) {
                        truncated_ = true;
                        break;
                    }
                    node(item, depth + 1,
                         (is_container(key) ? describe_type(key) : scalar(key)) + ": ");
                }
                break;
            }
            case ObjectType::kInstance: {
                const auto* instance = static_cast<const Instance*>(object);
                if (!line(depth,
                          label + describe_type(value) + (instance->via_newobj ? " (new)" : ""))) {
                    break;
                }
                if (!instance->args.is_none())
                    node(instance->args, depth + 1, "args: ");
                if (!instance->kwargs.is_none())
                    node(instance->kwargs, depth + 1, "kwargs: ");
                if (!instance->state.is_none())
                    node(instance->state, depth + 1, "state: ");
                for (std::size_t i = 0; i < instance->list_items.size(); ++i) {
                    node(instance->list_items[i], depth + 1, "item[" + std::to_string(i) + "] ");
                }
                for (const auto& [key, item] : instance->dict_items) {
                    node(item, depth + 1, "item " + scalar(key) + ": ");
                }
                break;
            }
            default:
                break;
        }
        on_path_.erase(object);
    }

    std::ostream& out_;
    const PrintOptions& options_;
    const std::uint32_t max_depth_;
    std::uint64_t lines_ = 0;
    bool truncated_ = false;
    std::unordered_set<const Object*> on_path_;
};

}  // namespace

std::string tensor_summary(const Tensor& tensor) {
    std::string text = "tensor ";
    text += tensor.dtype ? std::string(dtype_display_name(*tensor.dtype)) : std::string("?");
    text += " " + join_dims(tensor.shape) + " stride " + join_dims(tensor.stride);
    text += " storage data/" + tensor.storage->key + " offset " +
            std::to_string(tensor.storage_offset) + " (" + std::to_string(tensor.storage->numel) +
            " elements, " + tensor.storage->location + ")";
    return text;
}

void print_value(std::ostream& out, const Value& value, const PrintOptions& options) {
    Printer(out, options).print(value);
}

}  // namespace z2f::pickle
