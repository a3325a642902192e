// Typed access to a pickle value tree with messages that say where and what.
//
// A Field is a value plus its path from the root ("optimizer_state_dict.partition_count[0]")
// and the file it came from. Every accessor either returns the requested type or throws an
// input error of the form "<file>: <path> is <what it is>, expected <what we need>".
//
// A pickle is a graph, not a tree: one memoised value can be referenced any number of times for
// a few bytes each. Walking it as a tree (a list of the same dict N times, a name used as the
// key of every entry, a shape shared by every parameter) multiplies the work and the copied
// names, paths and shapes, so that a 25 KB pickle took the interpreter past 10 s and toward
// gigabytes. All fields derived from one root therefore share a budget proportional to the
// size of the file's data.pkl (kUnitsPerPickleByte units per byte, a unit being a byte of
// copied name or path, a shape dimension, a field or a dict entry scanned by a lookup);
// exceeding it is an input error.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "checkpoint/checkpoint_meta.hpp"
#include "container/torch_file.hpp"
#include "pickle/value.hpp"

namespace z2f::checkpoint {

class Field {
  public:
    // A root: every field reached from it draws on one new interpretation budget.
    Field(const container::TorchFile& file, const pickle::Value& value, std::string path);

    const pickle::Value& value() const noexcept { return *value_; }
    const std::string& path() const noexcept { return path_; }
    const container::TorchFile& file() const noexcept { return *file_; }
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

    // An inert object (a pickled class instance such as DeepSpeed's fragment_address): its
    // constructor arguments and its BUILD state; nullopt when the value is not an instance.
    struct InstanceParts;
    std::optional<InstanceParts> instance_parts() const;

    [[noreturn]] void fail(std::string_view expected) const;

    // Interpretation budget per byte of data.pkl. The fixtures use under 1 unit per byte;
    // long parameter names fetched from the memo might take an honest file to about 20.
    static constexpr std::uint64_t kUnitsPerPickleByte = 64;
    static constexpr std::uint64_t kUnitsSlack = std::uint64_t{1} << 20;

  private:
    struct Budget {
        std::uint64_t limit = 0;
        std::uint64_t used = 0;
        std::uint64_t pickle_bytes = 0;
    };

    Field(const container::TorchFile& file, const pickle::Value& value, std::string path,
          std::shared_ptr<Budget> budget)
        : file_(&file), value_(&value), path_(std::move(path)), budget_(std::move(budget)) {}
    Field child(const pickle::Value& value, std::string path) const;
    // Draws `units` from the budget, or throws an input error.
    void charge(std::uint64_t units) const;

    const container::TorchFile* file_;
    const pickle::Value* value_;
    std::string path_;
    std::shared_ptr<Budget> budget_;
};

struct Field::InstanceParts {
    std::string class_name;  // the callable's name ("fragment_address"), empty if not a global
    Field args;
    Field state;
};

}  // namespace z2f::checkpoint
