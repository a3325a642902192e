// The value tree a pickle turns into, without executing anything.
//
// Scalars (None, bool, 64-bit int, float) are held inline in a `Value`; everything else is an
// `Object` owned by the document's arena and referenced by pointer, so that a memoised object
// referenced a million times costs a million pointers, never a million copies, and so that
// cycles (a list containing itself) neither leak nor recurse on destruction.
//
// Objects the loader understands become real nodes: str, bytes, tuple, list, dict (insertion
// order kept: it is the data layout of DeepSpeed's param_shapes), set, global references, torch
// storages and tensors. Anything else is an `Instance`: the callable and arguments it would
// have been built from, plus whatever BUILD / SETITEM(S) / APPEND(S) fed it. Reading meaning
// out of instances (ZeroStageEnum, loss scalers, ...) is the business of the caller.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/dtype.hpp"

namespace z2f::pickle {

struct Object;

class Value {
  public:
    enum class Kind : std::uint8_t { kNone, kBool, kInt, kFloat, kObject };

    Value() noexcept : kind_(Kind::kNone), int_(0) {}
    static Value boolean(bool value) noexcept {
        Value v;
        v.kind_ = Kind::kBool;
        v.int_ = value ? 1 : 0;
        return v;
    }
    static Value integer(std::int64_t value) noexcept {
        Value v;
        v.kind_ = Kind::kInt;
        v.int_ = value;
        return v;
    }
    static Value real(double value) noexcept {
        Value v;
        v.kind_ = Kind::kFloat;
        v.float_ = value;
        return v;
    }
    static Value object(Object* object) noexcept {
        Value v;
        v.kind_ = Kind::kObject;
        v.object_ = object;
        return v;
    }

    Kind kind() const noexcept { return kind_; }
    bool is_none() const noexcept { return kind_ == Kind::kNone; }
    bool is_bool() const noexcept { return kind_ == Kind::kBool; }
    bool is_int() const noexcept { return kind_ == Kind::kInt; }
    bool is_float() const noexcept { return kind_ == Kind::kFloat; }
    bool is_object() const noexcept { return kind_ == Kind::kObject; }

    bool as_bool() const noexcept { return int_ != 0; }
    std::int64_t as_int() const noexcept { return int_; }
    double as_float() const noexcept { return float_; }
    Object* as_object() const noexcept { return kind_ == Kind::kObject ? object_ : nullptr; }

    // Typed views; nullptr / nullopt when the value is something else.
    template <typename T>
    const T* get() const noexcept;
    std::optional<std::string_view> string() const noexcept;

  private:
    Kind kind_;
    union {
        std::int64_t int_;
        double float_;
        Object* object_;
    };
};

enum class ObjectType : std::uint8_t {
    kStr,
    kBytes,
    kBigInt,
    kTuple,
    kList,
    kSet,
    kDict,
    kGlobal,
    kInstance,
    kStorage,
    kTensor,
};

std::string_view object_type_name(ObjectType type) noexcept;

struct Object {
    explicit Object(ObjectType t) noexcept : type(t) {}
    virtual ~Object() = default;
    Object(const Object&) = delete;
    Object& operator=(const Object&) = delete;

    ObjectType type;
    // Nesting depth of the value when it was last modified; bounded by the machine's limits.
    std::uint32_t depth = 1;
};

struct Str : Object {
    static constexpr ObjectType kType = ObjectType::kStr;
    Str() noexcept : Object(kType) {}
    std::string text;  // UTF-8
};

struct Bytes : Object {
    static constexpr ObjectType kType = ObjectType::kBytes;
    Bytes() noexcept : Object(kType) {}
    std::string data;
};

// An integer that does not fit in 64 bits. Kept (as its little-endian two's complement bytes)
// so that parsing a file never fails on a number nobody needs; using it as an int is an error.
struct BigInt : Object {
    static constexpr ObjectType kType = ObjectType::kBigInt;
    BigInt() noexcept : Object(kType) {}
    std::string le_bytes;
    std::string decimal;  // for text-form LONG opcodes
};

// Tuple, list and set share a representation.
struct Sequence : Object {
    explicit Sequence(ObjectType t) noexcept : Object(t) {}
    std::vector<Value> items;
};
struct Tuple : Sequence {
    static constexpr ObjectType kType = ObjectType::kTuple;
    Tuple() noexcept : Sequence(kType) {}
};
struct List : Sequence {
    static constexpr ObjectType kType = ObjectType::kList;
    List() noexcept : Sequence(kType) {}
};
struct Set : Sequence {
    static constexpr ObjectType kType = ObjectType::kSet;
    Set() noexcept : Sequence(kType) {}
};

struct Dict : Object {
    static constexpr ObjectType kType = ObjectType::kDict;
    Dict() noexcept : Object(kType) {}
    // Insertion order, as Python keeps it. A repeated key (only in hand-made pickles) is kept
    // as a second entry; find() returns the last one, which is the value Python would keep.
    std::vector<std::pair<Value, Value>> items;
    bool ordered = false;  // built through collections.OrderedDict
    Value state;           // BUILD argument, e.g. the `_metadata` of a module state dict

    // Value of the entry whose key is the string `key`, or nullptr.
    const Value* find(std::string_view key) const noexcept;
};

// A `module qualname` reference from GLOBAL / STACK_GLOBAL / INST.
struct Global : Object {
    static constexpr ObjectType kType = ObjectType::kGlobal;
    Global() noexcept : Object(kType) {}
    std::string module;
    std::string name;
    bool is(std::string_view m, std::string_view n) const noexcept {
        return module == m && name == n;
    }
};

// An object the loader does not construct: what it would have been built from.
struct Instance : Object {
    static constexpr ObjectType kType = ObjectType::kInstance;
    Instance() noexcept : Object(kType) {}
    Value callable;  // usually a Global
    Value args;      // usually a Tuple
    Value kwargs;    // NEWOBJ_EX only
    bool via_newobj = false;
    Value state;  // BUILD argument
    std::vector<Value> list_items;
    std::vector<std::pair<Value, Value>> dict_items;

    // The callable as a Global, or nullptr.
    const Global* global() const noexcept;
};

// A torch storage named by a persistent id ('storage', <Type>Storage, key, location, numel).
struct Storage : Object {
    static constexpr ObjectType kType = ObjectType::kStorage;
    Storage() noexcept : Object(kType) {}
    std::optional<DType> dtype;  // none for UntypedStorage (numel is then in bytes)
    std::string key;             // record "data/<key>"
    std::string location;        // "cpu", "cuda:3", ... (irrelevant: the bytes are in the file)
    std::uint64_t numel = 0;
};

// A tensor view (storage, element offset, shape, strides), from _rebuild_tensor_v2/v3 and the
// wrappers around them.
struct Tensor : Object {
    static constexpr ObjectType kType = ObjectType::kTensor;
    Tensor() noexcept : Object(kType) {}
    const Storage* storage = nullptr;
    std::optional<DType> dtype;
    std::uint64_t storage_offset = 0;  // in elements
    std::vector<std::uint64_t> shape;
    std::vector<std::int64_t> stride;
    bool requires_grad = false;
};

template <typename T>
const T* Value::get() const noexcept {
    if (kind_ != Kind::kObject || object_->type != T::kType) {
        return nullptr;
    }
    return static_cast<const T*>(object_);
}

// A parsed pickle: the root value and the arena that owns every object in it.
class Document {
  public:
    Document() = default;
    Document(Document&&) noexcept = default;
    Document& operator=(Document&&) noexcept = default;

    const Value& root() const noexcept { return root_; }
    std::size_t object_count() const noexcept { return arena_.size(); }

    template <typename T>
    T* make() {
        arena_.push_back(std::make_unique<T>());
        return static_cast<T*>(arena_.back().get());
    }
    void set_root(Value root) noexcept { root_ = root; }

    // Every storage the pickle's persistent ids name, once each, in the order of first mention:
    // a container that lays storages out by key (the legacy format) checks them against it.
    const std::vector<const Storage*>& storages() const noexcept { return storages_; }
    void add_storage(const Storage* storage) { storages_.push_back(storage); }

  private:
    std::vector<std::unique_ptr<Object>> arena_;
    std::vector<const Storage*> storages_;
    Value root_;
};

// "None", "int", "str", "dict", "OrderedDict", "torch.Tensor", "instance of a.B", ...
std::string describe_type(const Value& value);

}  // namespace z2f::pickle
