// A protocol-2 pickle emitter: the opcodes torch.save and DeepSpeed checkpoints use, a value tree
// to build nested objects with, and the torch conventions for storages and tensors.
//
// Byte format. A pickle is a program for a stack machine. Ours always read
//
//     0x80 0x02      PROTO 2          (torch.save's DEFAULT_PROTOCOL)
//     <one value>
//     0x2e           STOP
//
// Opcodes emitted and their operands (integers little-endian unless said otherwise):
//
//     '}' EMPTY_DICT   ']' EMPTY_LIST   ')' EMPTY_TUPLE   '(' MARK
//     0x85 / 0x86 / 0x87   TUPLE1 / TUPLE2 / TUPLE3: pop 1..3 items into a tuple
//     't' TUPLE: pop everything above the last MARK into a tuple
//     's' SETITEM (key, value)   'u' SETITEMS (pairs above MARK)
//     'a' APPEND (item)          'e' APPENDS (items above MARK)
//     'K' BININT1 u8   'M' BININT2 u16   'J' BININT i32
//     0x8a LONG1 n:u8 then n bytes of two's complement, least significant first, shortest form
//     'G' BINFLOAT: IEEE-754 double, 8 bytes BIG-endian (the one big-endian field of pickle)
//     0x88 NEWTRUE   0x89 NEWFALSE   'N' NONE
//     'X' BINUNICODE u32 length, then that many UTF-8 bytes
//     'c' GLOBAL "module\nname\n" (Python-2 spelling of module names, as protocol 2 writes)
//     'R' REDUCE: callable(*args)        0x81 NEWOBJ: cls.__new__(cls, *args)
//     'b' BUILD: obj.__setstate__(state) 'Q' BINPERSID: pop an id, push what it names
//     'q' BINPUT u8 / 'r' LONG_BINPUT u32: store the stack top in the memo
//     'h' BINGET u8 / 'j' LONG_BINGET u32: push a memo entry again
//
// Choices that mirror Python's own pickler (so output reads like torch.save's):
// - an integer takes BININT1 for 0..255, BININT2 for 256..65535, BININT for the rest of the
//   int32 range, LONG1 beyond it (storage numels of big partitions need LONG1);
// - tuples of 0..3 items use EMPTY_TUPLE / TUPLE1..3, longer ones MARK ... TUPLE;
// - dict and list items go in batches of at most 1000: a batch of one is `key value SETITEM`
//   (`item APPEND`), a longer one `MARK ... SETITEMS` (`MARK ... APPENDS`);
// - every GLOBAL is memoized at first use and later references are BINGET, as Python memoizes
//   class and function references.
// Nothing else is memoized unless asked (PickleValue::shared, PickleWriter::memo_put): the output
// is a pure function of the value, so two runs give identical bytes.
//
// MemoPolicy::kLikePython memoizes, as Python's own pickler does, every object it memoizes:
// after each BINUNICODE, EMPTY_DICT, EMPTY_LIST, non-empty tuple (TUPLE1-3, TUPLE), REDUCE and
// NEWOBJ a BINPUT follows (never after EMPTY_TUPLE, numbers, None, bools, BINPERSID, BUILD).
// Fed the objects torch.save pickles, in the same order, it writes torch.save's bytes (the
// universal checkpoint files, docs/universal-checkpoint.md §5). A value referenced twice is the
// caller's to fetch with memo_get(memo_size() - 1 at its first write); PickleValue::shared
// assumes the default policy.
//
// torch conventions (torch/serialization.py, torch/_utils.py), all within the weights_only
// allow-list except the arbitrary GLOBALs a caller names itself:
//   storage  BINPERSID of ('storage', GLOBAL torch <X>Storage, key:str, location:str, numel:int);
//            numel counts elements of the typed storage
//   tensor   GLOBAL torch._utils _rebuild_tensor_v2, then the args tuple (storage, offset in
//            elements, size tuple, stride tuple, requires_grad, OrderedDict()), REDUCE
//   OrderedDict  GLOBAL collections OrderedDict, EMPTY_TUPLE, REDUCE, then its items
//   torch.Size   GLOBAL torch Size, (dims tuple,), REDUCE
//   bytes    protocol 2 has no bytes opcode: GLOBAL _codecs encode, (latin-1 text, 'latin1'),
//            REDUCE; b'' is GLOBAL __builtin__ bytes, EMPTY_TUPLE, REDUCE
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/bytes.hpp"
#include "common/dtype.hpp"

namespace z2f::pickle {

// Low-level emitter: one call per opcode (or per typed value). The caller keeps the stack
// balanced; the value tree below does that for nested data.
enum class MemoPolicy : std::uint8_t {
    kGlobalsAndShared,  // GLOBALs and shared_unicode() texts only
    kLikePython,        // every object Python's pickler memoizes (see above)
};

class PickleWriter {
  public:
    explicit PickleWriter(MemoPolicy policy = MemoPolicy::kGlobalsAndShared);  // emits PROTO 2

    void none();
    void boolean(bool value);
    void integer(std::int64_t value);
    void floating(double value);
    void unicode(std::string_view utf8);
    // Like unicode(), but the first occurrence of a text is memoized and later ones are BINGET
    // (torch.save's pickles reuse 'storage' and 'cpu' this way).
    void shared_unicode(std::string_view utf8);
    // GLOBAL module name, memoized (see above). Neither part may contain a newline.
    void global(std::string_view module, std::string_view name);

    void empty_tuple();
    void empty_list();
    void empty_dict();
    void mark();
    // A tuple of `count` items: begin_tuple(count), push the items, end_tuple(count). Only
    // tuples of more than 3 items need the MARK that begin_tuple writes.
    void begin_tuple(std::size_t count);
    void end_tuple(std::size_t count);
    void setitem();
    void setitems();
    void append();
    void appends();
    void reduce();
    void newobj();
    void build();
    void binpersid();

    // Stores the stack top in the memo; returns its index.
    std::uint32_t memo_put();
    void memo_get(std::uint32_t index);
    // Memo entries stored so far: the index of the next BINPUT.
    std::uint32_t memo_size() const noexcept { return next_memo_; }
    // Memo entries keyed by object identity (PickleValue::shared).
    const std::uint32_t* memo_lookup(const void* object) const;
    void memo_remember(const void* object, std::uint32_t index);

    std::size_t size() const noexcept { return out_.size(); }
    // Appends STOP and hands out the pickle. The writer is spent afterwards.
    std::vector<std::byte> finish();

  private:
    void op(std::uint8_t opcode) { out_.put_u8(opcode); }
    void unicode_op(std::string_view utf8);
    // A BINPUT of the object just pushed, under kLikePython.
    void memoize_like_python() {
        if (policy_ == MemoPolicy::kLikePython)
            memo_put();
    }

    MemoPolicy policy_;
    ByteWriter out_;
    std::uint32_t next_memo_ = 0;
    std::map<std::string, std::uint32_t, std::less<>> memo_globals_;
    std::map<std::string, std::uint32_t, std::less<>> memo_texts_;
    std::map<const void*, std::uint32_t> memo_objects_;
};

// Emits `count` dict items in Python's batches; write_item(i) must push key i, then value i.
void write_setitems(PickleWriter& writer, std::size_t count,
                    const std::function<void(std::size_t)>& write_item);
// Emits `count` list items in Python's batches; write_item(i) must push item i.
void write_appends(PickleWriter& writer, std::size_t count,
                   const std::function<void(std::size_t)>& write_item);

// A storage as a persistent id names it.
struct StorageToWrite {
    DType dtype = DType::kF32;  // gives the class torch.<X>Storage (torch_storage_name)
    std::string key;            // record name under data/: "0", "1", ...
    std::uint64_t numel = 0;    // elements of the whole storage, in `dtype`
    std::string location = "cpu";
};

// A tensor as a view of a storage.
struct TensorToWrite {
    StorageToWrite storage;
    std::uint64_t storage_offset = 0;   // in elements
    std::vector<std::uint64_t> shape;   // () is a 0-dim scalar
    std::vector<std::uint64_t> stride;  // in elements; empty means row-major contiguous
    bool requires_grad = false;
};

// Row-major strides of `shape`, computed the way torch does (a size-0 dimension counts as 1, so
// shape (5, 0) has strides (1, 1) and (2, 0, 3) has (3, 3, 1)).
std::vector<std::uint64_t> contiguous_strides(std::span<const std::uint64_t> shape);

// Pushes the storage object: the persistent-id tuple followed by BINPERSID.
void write_storage(PickleWriter& writer, const StorageToWrite& storage);
// Pushes a tensor: _rebuild_tensor_v2(storage, offset, size, stride, requires_grad, OrderedDict()).
void write_tensor_v2(PickleWriter& writer, const TensorToWrite& tensor);

// A Python value to pickle. Cheap to build with brace lists:
//
//     PickleValue::dict({{"zero_stage",
//     PickleValue::reduce(PickleValue::global("deepspeed.runtime.zero.config",
//                                                             "ZeroStageEnum"),
//                                               PickleValue::tuple({3}))},
//                  {"partition_count", 2},
//                  {"fp32_flat_groups", PickleValue::list({PickleValue::tensor(ref)})}})
//
// Implicit conversions exist from bool, integers, double and text.
class PickleValue {
  public:
    enum class Kind : std::uint8_t {
        kNone,
        kBool,
        kInt,
        kFloat,
        kString,
        kBytes,
        kTuple,
        kList,
        kDict,
        kOrderedDict,
        kGlobal,
        kReduce,
        kNewObj,
        kBuild,
        kPersistentId,
        kTensor,
        kStorage,
        kShared,
    };
    using Items = std::vector<std::pair<PickleValue, PickleValue>>;

    PickleValue() = default;  // None
    PickleValue(std::nullptr_t) {}
    PickleValue(bool value) : kind_(Kind::kBool), int_(value ? 1 : 0) {}
    template <typename T>
    requires std::is_integral_v<T> &&(!std::is_same_v<T, bool>)PickleValue(T value)
        : kind_(Kind::kInt), int_(checked_int(value)) {}
    PickleValue(double value) : kind_(Kind::kFloat), float_(value) {}
    PickleValue(const char* text) : kind_(Kind::kString), text_(text) {}
    PickleValue(std::string text) : kind_(Kind::kString), text_(std::move(text)) {}
    PickleValue(std::string_view text) : kind_(Kind::kString), text_(text) {}

    static PickleValue none() { return {}; }
    static PickleValue boolean(bool value) { return PickleValue(value); }
    static PickleValue integer(std::int64_t value) { return PickleValue(value); }
    static PickleValue floating(double value) { return PickleValue(value); }
    static PickleValue string(std::string text) { return PickleValue(std::move(text)); }
    static PickleValue bytes(std::span<const std::byte> data);
    static PickleValue tuple(std::vector<PickleValue> items);
    static PickleValue list(std::vector<PickleValue> items);
    static PickleValue dict(Items items);
    static PickleValue ordered_dict(Items items);
    static PickleValue global(std::string module, std::string name);
    // callable(*args); `args` must be a tuple.
    static PickleValue reduce(PickleValue callable, PickleValue args);
    // cls.__new__(cls, *args); `args` must be a tuple.
    static PickleValue newobj(PickleValue cls, PickleValue args);
    // object.__setstate__(state), the value being `object`.
    static PickleValue build(PickleValue object, PickleValue state);
    // An instance as protocol 2 pickles plain Python objects: NEWOBJ with () then BUILD(state).
    static PickleValue object(PickleValue cls, PickleValue state);
    static PickleValue persistent_id(PickleValue id);
    static PickleValue tensor(TensorToWrite tensor);
    static PickleValue storage(StorageToWrite storage);  // the persistent-id form of a bare storage
    static PickleValue torch_size(std::span<const std::uint64_t> dims);
    static PickleValue int_tuple(std::span<const std::uint64_t> values);
    // The same object referenced from several places: pickled once, then BINGET.
    static PickleValue shared(std::shared_ptr<const PickleValue> value);

    Kind kind() const noexcept { return kind_; }
    // The kind after looking through PickleValue::shared.
    Kind resolved_kind() const noexcept { return shared_ ? shared_->resolved_kind() : kind_; }

    // Pushes this value.
    void write(PickleWriter& writer) const;

  private:
    template <typename T>
    static std::int64_t checked_int(T value) {
        if constexpr (std::is_unsigned_v<T> && sizeof(T) >= sizeof(std::int64_t)) {
            if (value > static_cast<T>(std::numeric_limits<std::int64_t>::max())) {
                throw_int_range();
            }
        }
        return static_cast<std::int64_t>(value);
    }
    [[noreturn]] static void throw_int_range();
    void write_tuple_items(PickleWriter& writer) const;
    const PickleValue& part(std::size_t index) const { return items_[index]; }

    Kind kind_ = Kind::kNone;
    std::int64_t int_ = 0;
    double float_ = 0.0;
    std::string text_;  // text, raw bytes, or the module of a GLOBAL
    std::string name_;  // the name of a GLOBAL
    // Tuple and list elements; dict items flattened as key, value, key, value ...; the two
    // operands of REDUCE / NEWOBJ / BUILD; the id of a persistent id.
    std::vector<PickleValue> items_;
    std::shared_ptr<const TensorToWrite> tensor_;
    std::shared_ptr<const PickleValue> shared_;
};

// A complete pickle (PROTO 2, the value, STOP).
std::vector<std::byte> dump(const PickleValue& value);

}  // namespace z2f::pickle
