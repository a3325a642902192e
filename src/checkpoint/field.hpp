// Typed access to a pickle value tree with messages that say where and what.
//
// A Field is a value plus its path from the root ("optimizer_state_dict.partition_count[0]")
// and the file it came from. Every accessor either returns the requested type or throws an
// input error of the form "<file>: <path> is <what it is>, expected <what we need>".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "checkpoint/checkpoint_meta.hpp"
#include "container/torch_file.hpp"
#include "pickle/value.hpp"

namespace z2f {

class Field {
  public:
    Field(const TorchFile& file, const pickle::Value& value, std::string path)
        : file_(&file), value_(&value), path_(std::move(path)) {}

    const pickle::Value& value() const noexcept { return *value_; }
    const std::string& path() const noexcept { return path_; }
    const TorchFile& file() const noexcept { return *file_; }
    bool is_none() const noexcept { return value_->is_none(); }
    bool is_dict() const noexcept { return value_->get<pickle::Dict>() != nullptr; }
    bool is_list_like() const noexcept;

    // Dict member access: `at` requires the key, `find` returns nullopt when it is absent.
    Field at(std::string_view key) const;
    std::optional<Field> find(std::string_view key) const;

    std::int64_t as_int() const;
    std::string as_string() const;
    // Elements of a list or tuple.
    std::vector<Field> elements() const;
    // Entries of a dict whose keys are all strings, in insertion order.
    std::vector<std::pair<std::string, Field>> entries() const;
    // torch.Size, tuple or list of non-negative ints whose product fits in 64 bits.
    std::vector<std::uint64_t> as_shape() const;
    // A contiguous tensor located in its file. Placeholders (0 elements) are not located.
    TensorRef as_tensor(std::uint32_t file_index) const;

    [[noreturn]] void fail(std::string_view expected) const;

  private:
    Field child(const pickle::Value& value, std::string path) const {
        return Field(*file_, value, std::move(path));
    }

    const TorchFile* file_;
    const pickle::Value* value_;
    std::string path_;
};

}  // namespace z2f
