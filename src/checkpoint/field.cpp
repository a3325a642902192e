#include "checkpoint/field.hpp"

#include "common/checked_math.hpp"
#include "common/errors.hpp"

namespace z2f::checkpoint {

Field::Field(const container::TorchFile& file, const pickle::Value& value, std::string path)
    : file_(&file), value_(&value), path_(std::move(path)), budget_(std::make_shared<Budget>()) {
    budget_->pickle_bytes = file.pickle_size();
    budget_->limit = kUnitsPerPickleByte * budget_->pickle_bytes + kUnitsSlack;
}

Field Field::child(const pickle::Value& value, std::string path) const {
    charge(path.size() + 1);
    return Field(*file_, value, std::move(path), budget_);
}

void Field::charge(std::uint64_t units) const {
    budget_->used += units;
    if (budget_->used > budget_->limit) {
        constexpr std::size_t kShownPath = 200;
        std::string where = path_.empty() ? std::string("the top level") : path_;
        if (where.size() > kShownPath) {
            where = where.substr(0, kShownPath) + "...";
        }
        throw_input_error(file_->path(),
                          "reading " + where + " exceeds the interpretation budget of " +
                              std::to_string(budget_->limit) + " units for a " +
                              std::to_string(budget_->pickle_bytes) +
                              "-byte pickle: the pickle refers to the same values over and "
                              "over (a corrupt or hostile file)");
    }
}

bool Field::is_list_like() const noexcept {
    return value_->get<pickle::List>() != nullptr || value_->get<pickle::Tuple>() != nullptr;
}

std::optional<Field::InstanceParts> Field::instance_parts() const {
    const auto* instance = value_->get<pickle::Instance>();
    if (instance == nullptr) {
        return std::nullopt;
    }
    const pickle::Global* callable = instance->global();
    std::string name = callable != nullptr ? callable->name : std::string();
    charge(name.size());
    return InstanceParts{std::move(name), child(instance->args, path_ + ".<args>"),
                         child(instance->state, path_ + ".<state>")};
}

void Field::fail(std::string_view expected) const {
    throw_input_error(file_->path(), path_ + " is " + pickle::describe_type(*value_) +
                                         ", expected " + std::string(expected));
}

Field Field::at(std::string_view key) const {
    std::optional<Field> found = find(key);
    if (!found) {
        throw_input_error(file_->path(), (path_.empty() ? std::string("top level") : path_) +
                                             " has no key '" + std::string(key) + "'");
    }
    return *found;
}

std::optional<Field> Field::find(std::string_view key) const {
    const auto* dict = value_->get<pickle::Dict>();
    if (dict == nullptr) {
        fail("a dict");
    }
    charge(dict->items.size());  // the lookup scans every entry
    const pickle::Value* member = dict->find(key);
    if (member == nullptr) {
        return std::nullopt;
    }
    return child(*member, path_.empty() ? std::string(key) : path_ + "." + std::string(key));
}

std::int64_t Field::as_int() const {
    if (!value_->is_int()) {
        fail("an int");
    }
    return value_->as_int();
}

std::string Field::as_string() const {
    auto text = value_->string();
    if (!text) {
        fail("a str");
    }
    charge(text->size());
    return std::string(*text);
}

std::vector<Field> Field::elements() const {
    const pickle::Sequence* seq = value_->get<pickle::List>();
    if (seq == nullptr) {
        seq = value_->get<pickle::Tuple>();
    }
    if (seq == nullptr) {
        fail("a list");
    }
    charge(seq->items.size());
    std::vector<Field> out;
    out.reserve(seq->items.size());
    for (std::size_t i = 0; i < seq->items.size(); ++i) {
        out.push_back(child(seq->items[i], path_ + "[" + std::to_string(i) + "]"));
    }
    return out;
}

std::vector<std::pair<std::string, Field>> Field::entries() const {
    const auto* dict = value_->get<pickle::Dict>();
    if (dict == nullptr) {
        fail("a dict");
    }
    charge(dict->items.size());
    std::vector<std::pair<std::string, Field>> out;
    out.reserve(dict->items.size());
    for (const auto& [key, value] : dict->items) {
        auto name = key.string();
        if (!name) {
            throw_input_error(
                file_->path(),
                path_ + " has a key of type " + pickle::describe_type(key) + ", expected str keys");
        }
        charge(name->size());
        out.emplace_back(std::string(*name),
                         child(value, path_ + "['" + std::string(*name) + "']"));
    }
    return out;
}

std::vector<std::uint64_t> Field::as_shape() const {
    if (!is_list_like()) {
        fail("a shape (torch.Size, tuple or list of ints)");
    }
    std::vector<Field> dims = elements();
    charge(dims.size());
    std::vector<std::uint64_t> shape;
    for (const Field& dim : dims) {
        if (!dim.value().is_int() || dim.value().as_int() < 0) {
            fail("a shape of non-negative ints");
        }
        shape.push_back(static_cast<std::uint64_t>(dim.value().as_int()));
    }
    if (!checked_numel(shape)) {
        throw_input_error(file_->path(), path_ + ": shape's element count overflows 64 bits");
    }
    return shape;
}

TensorRef Field::as_tensor(std::uint32_t file_index) const {
    const auto* tensor = value_->get<pickle::Tensor>();
    if (tensor == nullptr) {
        fail("a tensor");
    }
    // locate() copies the path and the storage key into its result and messages.
    charge(tensor->shape.size() + tensor->storage->key.size() + path_.size());
    TensorRef ref;
    ref.file = file_index;
    auto numel = checked_numel(tensor->shape);
    if (numel && *numel == 0 && tensor->dtype) {
        // Placeholders (ZeRO-3 `module` entries) have no bytes to locate.
        ref.dtype = *tensor->dtype;
        ref.shape = tensor->shape;
        return ref;
    }
    container::TensorBytes bytes = file_->locate(*tensor, path_);
    ref.dtype = bytes.dtype;
    ref.shape = std::move(bytes.shape);
    ref.numel = bytes.numel;
    ref.offset = bytes.offset;
    ref.length = bytes.length;
    return ref;
}

}  // namespace z2f::checkpoint
