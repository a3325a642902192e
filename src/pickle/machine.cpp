#include "pickle/machine.hpp"

#include <charconv>
#include <cstring>
#include <unordered_map>

#include "common/bytes.hpp"
#include "common/errors.hpp"
#include "common/utf8.hpp"

namespace z2f::pickle {
namespace {

// Opcodes (CPython Lib/pickle.py names).
enum Opcode : std::uint8_t {
    kMark = '(',
    kStop = '.',
    kPop = '0',
    kPopMark = '1',
    kDup = '2',
    kFloat = 'F',
    kInt = 'I',
    kBinInt = 'J',
    kBinInt1 = 'K',
    kLong = 'L',
    kBinInt2 = 'M',
    kNone = 'N',
    kPersId = 'P',
    kBinPersId = 'Q',
    kReduce = 'R',
    kString = 'S',
    kBinString = 'T',
    kShortBinString = 'U',
    kUnicode = 'V',
    kBinUnicode = 'X',
    kAppend = 'a',
    kBuild = 'b',
    kGlobal = 'c',
    kDict = 'd',
    kEmptyDict = '}',
    kAppends = 'e',
    kGet = 'g',
    kBinGet = 'h',
    kInst = 'i',
    kLongBinGet = 'j',
    kList = 'l',
    kEmptyList = ']',
    kObj = 'o',
    kPut = 'p',
    kBinPut = 'q',
    kLongBinPut = 'r',
    kSetItem = 's',
    kTuple = 't',
    kEmptyTuple = ')',
    kSetItems = 'u',
    kBinFloat = 'G',
    kProto = 0x80,
    kNewObj = 0x81,
    kExt1 = 0x82,
    kExt2 = 0x83,
    kExt4 = 0x84,
    kTuple1 = 0x85,
    kTuple2 = 0x86,
    kTuple3 = 0x87,
    kNewTrue = 0x88,
    kNewFalse = 0x89,
    kLong1 = 0x8a,
    kLong4 = 0x8b,
    kBinBytes = 'B',
    kShortBinBytes = 'C',
    kShortBinUnicode = 0x8c,
    kBinUnicode8 = 0x8d,
    kBinBytes8 = 0x8e,
    kEmptySet = 0x8f,
    kAddItems = 0x90,
    kFrozenSet = 0x91,
    kNewObjEx = 0x92,
    kStackGlobal = 0x93,
    kMemoize = 0x94,
    kFrame = 0x95,
    kByteArray8 = 0x96,
    kNextBuffer = 0x97,
    kReadonlyBuffer = 0x98,
};

std::string opcode_name(std::uint8_t op) {
    switch (op) {
        case kMark:
            return "MARK";
        case kStop:
            return "STOP";
        case kPop:
            return "POP";
        case kPopMark:
            return "POP_MARK";
        case kDup:
            return "DUP";
        case kFloat:
            return "FLOAT";
        case kInt:
            return "INT";
        case kBinInt:
            return "BININT";
        case kBinInt1:
            return "BININT1";
        case kLong:
            return "LONG";
        case kBinInt2:
            return "BININT2";
        case kNone:
            return "NONE";
        case kPersId:
            return "PERSID";
        case kBinPersId:
            return "BINPERSID";
        case kReduce:
            return "REDUCE";
        case kString:
            return "STRING";
        case kBinString:
            return "BINSTRING";
        case kShortBinString:
            return "SHORT_BINSTRING";
        case kUnicode:
            return "UNICODE";
        case kBinUnicode:
            return "BINUNICODE";
        case kAppend:
            return "APPEND";
        case kBuild:
            return "BUILD";
        case kGlobal:
            return "GLOBAL";
        case kDict:
            return "DICT";
        case kEmptyDict:
            return "EMPTY_DICT";
        case kAppends:
            return "APPENDS";
        case kGet:
            return "GET";
        case kBinGet:
            return "BINGET";
        case kInst:
            return "INST";
        case kLongBinGet:
            return "LONG_BINGET";
        case kList:
            return "LIST";
        case kEmptyList:
            return "EMPTY_LIST";
        case kObj:
            return "OBJ";
        case kPut:
            return "PUT";
        case kBinPut:
            return "BINPUT";
        case kLongBinPut:
            return "LONG_BINPUT";
        case kSetItem:
            return "SETITEM";
        case kTuple:
            return "TUPLE";
        case kEmptyTuple:
            return "EMPTY_TUPLE";
        case kSetItems:
            return "SETITEMS";
        case kBinFloat:
            return "BINFLOAT";
        case kProto:
            return "PROTO";
        case kNewObj:
            return "NEWOBJ";
        case kExt1:
            return "EXT1";
        case kExt2:
            return "EXT2";
        case kExt4:
            return "EXT4";
        case kTuple1:
            return "TUPLE1";
        case kTuple2:
            return "TUPLE2";
        case kTuple3:
            return "TUPLE3";
        case kNewTrue:
            return "NEWTRUE";
        case kNewFalse:
            return "NEWFALSE";
        case kLong1:
            return "LONG1";
        case kLong4:
            return "LONG4";
        case kBinBytes:
            return "BINBYTES";
        case kShortBinBytes:
            return "SHORT_BINBYTES";
        case kShortBinUnicode:
            return "SHORT_BINUNICODE";
        case kBinUnicode8:
            return "BINUNICODE8";
        case kBinBytes8:
            return "BINBYTES8";
        case kEmptySet:
            return "EMPTY_SET";
        case kAddItems:
            return "ADDITEMS";
        case kFrozenSet:
            return "FROZENSET";
        case kNewObjEx:
            return "NEWOBJ_EX";
        case kStackGlobal:
            return "STACK_GLOBAL";
        case kMemoize:
            return "MEMOIZE";
        case kFrame:
            return "FRAME";
        case kByteArray8:
            return "BYTEARRAY8";
        case kNextBuffer:
            return "NEXT_BUFFER";
        case kReadonlyBuffer:
            return "READONLY_BUFFER";
        default:
            break;
    }
    static constexpr char kDigits[] = "0123456789abcdef";
    std::string name = "opcode 0x";
    name += kDigits[op >> 4];
    name += kDigits[op & 0xF];
    return name;
}

void append_utf8(std::string& out, std::uint32_t code) {
    if (code < 0x80) {
        out += static_cast<char>(code);
    } else if (code < 0x800) {
        out += static_cast<char>(0xC0 | (code >> 6));
        out += static_cast<char>(0x80 | (code & 0x3F));
    } else if (code < 0x10000) {
        out += static_cast<char>(0xE0 | (code >> 12));
        out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (code & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (code >> 18));
        out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (code & 0x3F));
    }
}

std::optional<std::uint32_t> parse_hex(std::string_view digits) {
    std::uint32_t value = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value, 16);
    if (ec != std::errc() || end != digits.data() + digits.size()) {
        return std::nullopt;
    }
    return value;
}

// Thrown inside the machine, and caught by parse_pickle_prefix, when the bytes end before the
// pickle does: the caller has more bytes to offer.
struct EndOfData {};

class Machine {
  public:
    Machine(std::span<const std::byte> data, const std::string& source, const Limits& limits,
            bool data_may_continue = false)
        : data_(data), source_(source), limits_(limits), data_may_continue_(data_may_continue) {}

    Document run() {
        while (true) {
            if (pos_ >= data_.size()) {
                op_offset_ = pos_;
                if (data_may_continue_)
                    throw EndOfData{};
                fail_plain("pickle ends at byte " + std::to_string(pos_) +
                           " without a STOP opcode");
            }
            op_offset_ = pos_;
            op_ = read_u8();
            if (step()) {
                break;
            }
        }
        return std::move(doc_);
    }

    // Bytes consumed, the STOP opcode included, after run().
    std::size_t consumed() const noexcept { return pos_; }

  private:
    [[noreturn]] void fail_plain(const std::string& what) const {
        throw_input_error(source_, what);
    }
    [[noreturn]] void fail(const std::string& what) const {
        throw_input_error(
            source_, "byte " + std::to_string(op_offset_) + ": " + opcode_name(op_) + ": " + what);
    }

    // --- input -------------------------------------------------------------------------------
    std::uint64_t remaining() const noexcept { return data_.size() - pos_; }
    std::span<const std::byte> take(std::uint64_t count) {
        if (count > remaining()) {
            if (data_may_continue_)
                throw EndOfData{};
            fail("needs " + std::to_string(count) + " bytes but only " +
                 std::to_string(remaining()) + " remain");
        }
        auto bytes = data_.subspan(pos_, static_cast<std::size_t>(count));
        pos_ += static_cast<std::size_t>(count);
        return bytes;
    }
    std::uint8_t read_u8() { return std::to_integer<std::uint8_t>(take(1)[0]); }
    template <typename T>
    T read_le() {
        return load_le<T>(take(sizeof(T)).data());
    }
    std::string_view read_line() {
        const std::byte* begin = data_.data() + pos_;
        const void* newline = std::memchr(begin, '\n', data_.size() - pos_);
        if (newline == nullptr) {
            if (data_may_continue_)
                throw EndOfData{};
            fail("text argument is not terminated by a newline");
        }
        auto length = static_cast<std::size_t>(static_cast<const std::byte*>(newline) - begin);
        pos_ += length + 1;
        return {reinterpret_cast<const char*>(begin), length};
    }

    // --- stack -------------------------------------------------------------------------------
    std::size_t floor() const noexcept { return marks_.empty() ? 0 : marks_.back(); }
    void push(Value value) { stack_.push_back(value); }
    Value pop() {
        if (stack_.size() <= floor()) {
            fail("stack underflow");
        }
        Value value = stack_.back();
        stack_.pop_back();
        return value;
    }
    Value& top() {
        if (stack_.size() <= floor()) {
            fail("stack underflow");
        }
        return stack_.back();
    }
    std::vector<Value> pop_mark() {
        if (marks_.empty()) {
            fail("no MARK on the stack");
        }
        std::size_t mark = marks_.back();
        marks_.pop_back();
        std::vector<Value> items(stack_.begin() + static_cast<std::ptrdiff_t>(mark), stack_.end());
        stack_.resize(mark);
        return items;
    }

    // --- objects -----------------------------------------------------------------------------
    // Some calls build a value by copying an earlier one: set(list), OrderedDict(pairs),
    // bytes(b), _codecs.encode(s, ...), torch.Size(t), STACK_GLOBAL's names, a storage's key
    // and location. The earlier value can be fetched from the memo again for a few bytes each
    // time, so without a bound a small pickle makes the machine copy quadratically much (a
    // 184 KB pickle asked for 19 GB). An honest pickle copies each value at most about
    // once; all copies together may hold kCopyUnitsPerInputByte elements or bytes per input
    // byte (plus a little, for tiny pickles).
    static constexpr std::uint64_t kCopyUnitsPerInputByte = 2;
    static constexpr std::uint64_t kCopyUnitsSlack = 4096;
    void charge_copy(std::uint64_t units) {
        copied_ += units;
        if (copied_ > copy_budget_) {
            fail("values copied from earlier ones exceed " + std::to_string(copy_budget_) +
                 " elements or bytes for a " + std::to_string(data_.size()) +
                 "-byte pickle: the pickle refers to the same values over and over");
        }
    }
    static std::uint32_t depth_of(const Value& value) noexcept {
        const Object* object = value.as_object();
        return object == nullptr ? 0 : object->depth;
    }
    void grow_depth(Object* container, const Value& child) {
        std::uint32_t depth = depth_of(child) + 1;
        if (depth > container->depth) {
            if (depth > limits_.max_nesting) {
                fail("values nest deeper than " + std::to_string(limits_.max_nesting) + " levels");
            }
            container->depth = depth;
        }
    }
    Value make_str(std::string text) {
        if (!is_valid_utf8(text, Surrogates::kAllow)) {
            fail("string is not valid UTF-8");
        }
        Str* str = doc_.make<Str>();
        str->text = std::move(text);
        return Value::object(str);
    }
    Value make_bytes(std::string data) {
        Bytes* bytes = doc_.make<Bytes>();
        bytes->data = std::move(data);
        return Value::object(bytes);
    }
    template <typename T>
    Value make_sequence(std::vector<Value> items) {
        T* seq = doc_.make<T>();
        for (const Value& item : items) {
            grow_depth(seq, item);
        }
        seq->items = std::move(items);
        return Value::object(seq);
    }
    Value make_dict(bool ordered) {
        Dict* dict = doc_.make<Dict>();
        dict->ordered = ordered;
        return Value::object(dict);
    }
    Value make_global(std::string module, std::string name) {
        Global* global = doc_.make<Global>();
        global->module = std::move(module);
        global->name = std::move(name);
        return Value::object(global);
    }
    Value make_instance(Value callable, Value args, bool via_newobj) {
        Instance* instance = doc_.make<Instance>();
        instance->callable = callable;
        instance->args = args;
        instance->via_newobj = via_newobj;
        grow_depth(instance, args);
        return Value::object(instance);
    }
    Value make_int_from_le(std::span<const std::byte> bytes) {
        if (bytes.empty()) {
            return Value::integer(0);
        }
        bool negative = (std::to_integer<std::uint8_t>(bytes.back()) & 0x80) != 0;
        std::size_t n = bytes.size();
        bool fits = true;
        for (std::size_t i = 8; i < n; ++i) {
            auto byte = std::to_integer<std::uint8_t>(bytes[i]);
            if (byte != (negative ? 0xFF : 0x00)) {
                fits = false;
            }
        }
        if (n > 8 && fits) {
            // The low 8 bytes must carry the same sign for the value to fit in an int64.
            bool low_negative = (std::to_integer<std::uint8_t>(bytes[7]) & 0x80) != 0;
            fits = low_negative == negative;
        }
        if (!fits) {
            BigInt* big = doc_.make<BigInt>();
            big->le_bytes.assign(reinterpret_cast<const char*>(bytes.data()), n);
            return Value::object(big);
        }
        std::uint64_t raw = negative ? ~std::uint64_t{0} : 0;
        for (std::size_t i = 0; i < std::min<std::size_t>(n, 8); ++i) {
            raw &= ~(std::uint64_t{0xFF} << (8 * i));
            raw |= std::uint64_t{std::to_integer<std::uint8_t>(bytes[i])} << (8 * i);
        }
        return Value::integer(static_cast<std::int64_t>(raw));
    }
    Value make_int_from_text(std::string_view text) {
        std::int64_t value = 0;
        auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (ec == std::errc::result_out_of_range) {
            BigInt* big = doc_.make<BigInt>();
            big->decimal = std::string(text);
            return Value::object(big);
        }
        if (ec != std::errc() || end != text.data() + text.size() || text.empty()) {
            fail("'" + std::string(text.substr(0, 40)) + "' is not an integer");
        }
        return Value::integer(value);
    }

    // --- memo ----------------------------------------------------------------------------------
    void memo_put(std::uint64_t index) { memo_[index] = top(); }
    void memo_get(std::uint64_t index) {
        auto it = memo_.find(index);
        if (it == memo_.end()) {
            fail("memo key " + std::to_string(index) + " is not defined");
        }
        push(it->second);
    }
    std::uint64_t parse_memo_index(std::string_view text) {
        std::uint64_t index = 0;
        auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), index);
        if (ec != std::errc() || end != text.data() + text.size()) {
            fail("'" + std::string(text.substr(0, 40)) + "' is not a memo index");
        }
        return index;
    }

    // --- text-form strings -------------------------------------------------------------------
    std::string decode_quoted(std::string_view line) {
        if (line.size() < 2 || (line.front() != '\'' && line.front() != '"') ||
            line.back() != line.front()) {
            fail("STRING argument is not a quoted string");
        }
        std::string_view body = line.substr(1, line.size() - 2);
        std::string out;
        for (std::size_t i = 0; i < body.size(); ++i) {
            char c = body[i];
            if (c != '\\' || i + 1 == body.size()) {
                out += c;
                continue;
            }
            char e = body[++i];
            switch (e) {
                case 'n':
                    out += '\n';
                    break;
                case 't':
                    out += '\t';
                    break;
                case 'r':
                    out += '\r';
                    break;
                case '\\':
                    out += '\\';
                    break;
                case '\'':
                    out += '\'';
                    break;
                case '"':
                    out += '"';
                    break;
                case 'x': {
                    auto code =
                        i + 2 < body.size() ? parse_hex(body.substr(i + 1, 2)) : std::nullopt;
                    if (!code) {
                        fail("bad \\x escape in STRING argument");
                    }
                    out += static_cast<char>(*code);
                    i += 2;
                    break;
                }
                default:
                    out += '\\';
                    out += e;
            }
        }
        return out;
    }
    std::string decode_raw_unicode_escape(std::string_view line) {
        std::string out;
        for (std::size_t i = 0; i < line.size(); ++i) {
            auto c = static_cast<unsigned char>(line[i]);
            if (c == '\\' && i + 1 < line.size() && (line[i + 1] == 'u' || line[i + 1] == 'U')) {
                std::size_t digits = line[i + 1] == 'u' ? 4 : 8;
                auto code = i + 2 + digits <= line.size() ? parse_hex(line.substr(i + 2, digits))
                                                          : std::nullopt;
                if (!code || *code > 0x10FFFF) {
                    fail("bad \\u escape in UNICODE argument");
                }
                append_utf8(out, *code);
                i += 1 + digits;
            } else {
                append_utf8(out, c);  // raw-unicode-escape: other bytes are Latin-1
            }
        }
        return out;
    }

    // --- persistent ids: torch storages -----------------------------------------------------
    Value persistent_load(const Value& pid) {
        const Tuple* tuple = pid.get<Tuple>();
        if (tuple == nullptr || tuple->items.size() < 5 || tuple->items.size() > 6 ||
            tuple->items[0].string() != std::optional<std::string_view>("storage")) {
            fail("persistent id is " + describe_type(pid) +
                 ", expected the tuple ('storage', <storage type>, key, location, numel)");
        }
        // torch < 1.0 named a view into a root storage in a sixth element; later writers put
        // None there (the legacy format) or leave it out (zip).
        if (tuple->items.size() == 6 && !tuple->items[5].is_none()) {
            fail("storage persistent id carries view metadata (" + describe_type(tuple->items[5]) +
                 "): views into another storage, written by torch before 1.0, are not supported");
        }
        const Global* type = tuple->items[1].get<Global>();
        auto key = tuple->items[2].string();
        auto location = tuple->items[3].string();
        const Value& numel = tuple->items[4];
        if (type == nullptr || !key || key->empty() || !location || !numel.is_int() ||
            numel.as_int() < 0) {
            fail(
                "malformed storage persistent id: expected (str 'storage', torch.<Type>Storage, "
                "str key, str location, int numel >= 0)");
        }
        std::optional<DType> dtype;
        bool untyped = type->name == "UntypedStorage" &&
                       (type->module == "torch" || type->module == "torch.storage");
        if (!untyped) {
            if (type->module != "torch" || !(dtype = dtype_from_torch_storage_name(type->name))) {
                fail("unknown storage type " + type->module + "." + type->name);
            }
        }
        auto numel_value = static_cast<std::uint64_t>(numel.as_int());
        charge_copy(key->size());
        auto [it, inserted] = storages_.try_emplace(std::string(*key), nullptr);
        if (!inserted) {
            const Storage* known = it->second;
            if (known->dtype != dtype || known->numel != numel_value) {
                fail("storage '" + std::string(*key) +
                     "' is referenced again with a different type or size");
            }
            return Value::object(it->second);
        }
        charge_copy(location->size());
        Storage* storage = doc_.make<Storage>();
        storage->dtype = dtype;
        storage->key = std::string(*key);
        storage->location = std::string(*location);
        storage->numel = numel_value;
        it->second = storage;
        doc_.add_storage(storage);
        return Value::object(storage);
    }

    // --- calls with meaning --------------------------------------------------------------------
    std::vector<std::uint64_t> int_tuple(const Value& value, const char* what, bool allow_negative,
                                         std::vector<std::int64_t>* signed_out) {
        const Sequence* seq = value.get<Tuple>();
        if (seq == nullptr) {
            seq = value.get<List>();
        }
        if (seq == nullptr) {
            fail(std::string(what) + " is " + describe_type(value) + ", expected a tuple of ints");
        }
        if (seq->items.size() > 64) {
            fail(std::string(what) + " has " + std::to_string(seq->items.size()) +
                 " dimensions, more than 64");
        }
        std::vector<std::uint64_t> out;
        for (const Value& item : seq->items) {
            if (!item.is_int() || (!allow_negative && item.as_int() < 0)) {
                fail(std::string(what) + " holds " + describe_type(item) +
                     (allow_negative ? ", expected ints" : ", expected non-negative ints"));
            }
            if (signed_out != nullptr) {
                signed_out->push_back(item.as_int());
            } else {
                out.push_back(static_cast<std::uint64_t>(item.as_int()));
            }
        }
        return out;
    }

    // _rebuild_tensor(storage, offset, size, stride), _v2(..., requires_grad, hooks[, meta]),
    // _v3(..., requires_grad, hooks, dtype[, meta]).
    Value rebuild_tensor(const Global& fn, const Value& args_value) {
        const Tuple* args = args_value.get<Tuple>();
        std::size_t n = args == nullptr ? 0 : args->items.size();
        bool v1 = fn.name == "_rebuild_tensor";
        bool v3 = fn.name == "_rebuild_tensor_v3";
        bool arity_ok = v1 ? n == 4 : v3 ? (n == 7 || n == 8) : (n == 6 || n == 7);
        if (!arity_ok) {
            fail(fn.module + "." + fn.name + " called with " + describe_type(args_value) + " of " +
                 std::to_string(n) + " arguments");
        }
        const Storage* storage = args->items[0].get<Storage>();
        if (storage == nullptr) {
            fail(fn.name + ": argument 1 is " + describe_type(args->items[0]) +
                 ", expected a storage");
        }
        if (!args->items[1].is_int() || args->items[1].as_int() < 0) {
            fail(fn.name + ": storage offset is not a non-negative int");
        }
        Tensor* tensor = doc_.make<Tensor>();
        tensor->storage = storage;
        tensor->dtype = storage->dtype;
        tensor->storage_offset = static_cast<std::uint64_t>(args->items[1].as_int());
        tensor->shape = int_tuple(args->items[2], "tensor size", false, nullptr);
        int_tuple(args->items[3], "tensor stride", true, &tensor->stride);
        if (tensor->stride.size() != tensor->shape.size()) {
            fail(fn.name + ": size has " + std::to_string(tensor->shape.size()) +
                 " dimensions but stride has " + std::to_string(tensor->stride.size()));
        }
        if (!v1) {
            const Value& grad = args->items[4];
            tensor->requires_grad = (grad.is_bool() || grad.is_int()) && grad.as_int() != 0;
        }
        if (v3) {
            const Global* dtype = args->items[6].get<Global>();
            std::optional<DType> parsed;
            if (dtype == nullptr || dtype->module != "torch" ||
                !(parsed = dtype_from_torch_dtype_name(dtype->name))) {
                fail("_rebuild_tensor_v3: argument 7 is " + describe_type(args->items[6]) +
                     ", expected a known torch dtype");
            }
            tensor->dtype = parsed;
        }
        return Value::object(tensor);
    }

    static bool is_builtins(const std::string& module) {
        return module == "__builtin__" || module == "builtins";
    }
    static bool is_tensor_rebuild(const Global& fn) {
        return fn.module == "torch._utils" &&
               (fn.name == "_rebuild_tensor" || fn.name == "_rebuild_tensor_v2" ||
                fn.name == "_rebuild_tensor_v3");
    }

    // The callables the loader gives meaning to; std::nullopt means "keep it inert".
    std::optional<Value> reduce_known(const Global& fn, const Value& args_value) {
        const Tuple* args = args_value.get<Tuple>();
        std::size_t n = args == nullptr ? 0 : args->items.size();
        if (is_tensor_rebuild(fn)) {
            return rebuild_tensor(fn, args_value);
        }
        if (fn.is("torch._tensor", "_rebuild_from_type_v2")) {
            // (func, type, args, state): torch >= 2 wraps tensors that carry Python
            // attributes (ZeRO-3 sets ds_id on its fp32 partitions). The result is func(*args);
            // the attributes in `state` do not matter here.
            if (n == 4) {
                if (const Global* inner = args->items[0].get<Global>();
                    inner != nullptr && is_tensor_rebuild(*inner)) {
                    return rebuild_tensor(*inner, args->items[2]);
                }
            }
            return std::nullopt;
        }
        if (fn.module == "torch._utils" &&
            (fn.name == "_rebuild_parameter" || fn.name == "_rebuild_parameter_with_state")) {
            if (n >= 3 && args->items[0].get<Tensor>() != nullptr) {
                return args->items[0];
            }
            return std::nullopt;
        }
        if (fn.is("collections", "OrderedDict") || (is_builtins(fn.module) && fn.name == "dict")) {
            Value result = make_dict(fn.name == "OrderedDict");
            if (n == 0) {
                return result;
            }
            const Sequence* pairs = args->items[0].get<List>();
            if (pairs == nullptr) {
                pairs = args->items[0].get<Tuple>();
            }
            if (n != 1 || pairs == nullptr) {
                return std::nullopt;
            }
            charge_copy(pairs->items.size());
            auto* dict = static_cast<Dict*>(result.as_object());
            for (const Value& pair : pairs->items) {
                const Tuple* kv = pair.get<Tuple>();
                if (kv == nullptr || kv->items.size() != 2) {
                    return std::nullopt;
                }
                dict->items.emplace_back(kv->items[0], kv->items[1]);
                grow_depth(dict, kv->items[1]);
            }
            return result;
        }
        if (fn.is("torch", "Size")) {
            if (n == 1) {
                if (const Tuple* dims = args->items[0].get<Tuple>()) {
                    int_tuple(args->items[0], "torch.Size", false, nullptr);
                    charge_copy(dims->items.size());
                    return make_sequence<Tuple>(dims->items);
                }
            }
            return std::nullopt;
        }
        if (is_builtins(fn.module) && (fn.name == "set" || fn.name == "frozenset")) {
            if (n == 0) {
                return make_sequence<Set>({});
            }
            if (n == 1) {
                const Sequence* seq = args->items[0].get<List>();
                if (seq == nullptr) {
                    seq = args->items[0].get<Tuple>();
                }
                if (seq != nullptr) {
                    charge_copy(seq->items.size());
                    return make_sequence<Set>(seq->items);
                }
            }
            return std::nullopt;
        }
        if (fn.is("_codecs", "encode") ||
            (is_builtins(fn.module) && (fn.name == "bytes" || fn.name == "bytearray"))) {
            // Protocol 2 has no bytes opcode: bytes pickle as _codecs.encode(text, 'latin1').
            if (n == 0) {
                return make_bytes({});
            }
            if (n == 1) {
                if (const Bytes* bytes = args->items[0].get<Bytes>()) {
                    charge_copy(bytes->data.size());
                    return make_bytes(bytes->data);
                }
            }
            if (n == 2) {
                auto text = args->items[0].string();
                auto encoding = args->items[1].string();
                if (text && encoding) {
                    if (*encoding == "latin1" || *encoding == "latin-1" ||
                        *encoding == "iso-8859-1") {
                        charge_copy(text->size());
                        return latin1_bytes(*text);
                    }
                    if (*encoding == "utf-8" || *encoding == "utf8") {
                        charge_copy(text->size());
                        return make_bytes(std::string(*text));
                    }
                }
            }
            return std::nullopt;
        }
        return std::nullopt;
    }

    std::optional<Value> latin1_bytes(std::string_view utf8) {
        std::string out;
        for (std::size_t i = 0; i < utf8.size(); ++i) {
            auto c = static_cast<unsigned char>(utf8[i]);
            if (c < 0x80) {
                out += static_cast<char>(c);
            } else if ((c & 0xE0) == 0xC0 && i + 1 < utf8.size()) {
                unsigned code =
                    ((c & 0x1Fu) << 6) | (static_cast<unsigned char>(utf8[i + 1]) & 0x3Fu);
                if (code > 0xFF) {
                    return std::nullopt;
                }
                out += static_cast<char>(code);
                ++i;
            } else {
                return std::nullopt;
            }
        }
        return make_bytes(std::move(out));
    }

    Value reduce(const Value& callable, const Value& args) {
        if (const Global* fn = callable.get<Global>()) {
            if (auto known = reduce_known(*fn, args)) {
                return *known;
            }
        }
        return make_instance(callable, args, false);
    }

    void build(const Value& state) {
        Value& target = top();
        Object* object = target.as_object();
        if (object != nullptr) {
            switch (object->type) {
                case ObjectType::kInstance: {
                    auto* instance = static_cast<Instance*>(object);
                    instance->state = state;
                    grow_depth(instance, state);
                    return;
                }
                case ObjectType::kDict:
                    static_cast<Dict*>(object)->state = state;
                    return;
                case ObjectType::kTensor:
                    return;  // attributes of a tensor subclass; irrelevant here
                default:
                    break;
            }
        }
        fail("BUILD applied to " + describe_type(target) + ", which has no state to set");
    }

    void set_items(std::vector<Value> items) {
        if (items.size() % 2 != 0) {
            fail("odd number of items for a dict");
        }
        Value& target = top();
        if (target.get<Dict>() != nullptr) {
            auto* dict = static_cast<Dict*>(target.as_object());
            for (std::size_t i = 0; i < items.size(); i += 2) {
                grow_depth(dict, items[i + 1]);
                dict->items.emplace_back(items[i], items[i + 1]);
            }
        } else if (target.get<Instance>() != nullptr) {
            auto* instance = static_cast<Instance*>(target.as_object());
            for (std::size_t i = 0; i < items.size(); i += 2) {
                grow_depth(instance, items[i + 1]);
                instance->dict_items.emplace_back(items[i], items[i + 1]);
            }
        } else {
            fail("cannot set items on " + describe_type(target));
        }
    }

    void append_items(std::vector<Value> items) {
        Value& target = top();
        if (target.get<List>() != nullptr) {
            auto* list = static_cast<List*>(target.as_object());
            for (const Value& item : items) {
                grow_depth(list, item);
                list->items.push_back(item);
            }
        } else if (target.get<Instance>() != nullptr) {
            auto* instance = static_cast<Instance*>(target.as_object());
            for (const Value& item : items) {
                grow_depth(instance, item);
                instance->list_items.push_back(item);
            }
        } else {
            fail("cannot append to " + describe_type(target));
        }
    }

    // Executes one opcode; returns true at STOP.
    bool step() {
        switch (op_) {
            case kProto: {
                std::uint8_t proto = read_u8();
                if (proto > 5) {
                    fail("unsupported pickle protocol " + std::to_string(proto));
                }
                return false;
            }
            case kFrame: {
                auto length = read_le<std::uint64_t>();
                if (length > remaining()) {
                    if (data_may_continue_)
                        throw EndOfData{};
                    fail("frame of " + std::to_string(length) + " bytes but only " +
                         std::to_string(remaining()) + " remain");
                }
                return false;
            }
            case kStop:
                doc_.set_root(pop());
                return true;
            case kMark:
                if (marks_.size() >= limits_.max_nesting) {
                    fail("MARKs nest deeper than " + std::to_string(limits_.max_nesting) +
                         " levels");
                }
                marks_.push_back(stack_.size());
                return false;
            case kPop:
                if (stack_.size() > floor()) {
                    stack_.pop_back();
                } else {
                    pop_mark();
                }
                return false;
            case kPopMark:
                pop_mark();
                return false;
            case kDup:
                push(top());
                return false;

            case kNone:
                push(Value());
                return false;
            case kNewTrue:
                push(Value::boolean(true));
                return false;
            case kNewFalse:
                push(Value::boolean(false));
                return false;
            case kBinInt:
                push(Value::integer(static_cast<std::int32_t>(read_le<std::uint32_t>())));
                return false;
            case kBinInt1:
                push(Value::integer(read_u8()));
                return false;
            case kBinInt2:
                push(Value::integer(read_le<std::uint16_t>()));
                return false;
            case kLong1:
                push(make_int_from_le(take(read_u8())));
                return false;
            case kLong4: {
                auto length = static_cast<std::int32_t>(read_le<std::uint32_t>());
                if (length < 0) {
                    fail("negative byte count");
                }
                push(make_int_from_le(take(static_cast<std::uint64_t>(length))));
                return false;
            }
            case kInt: {
                std::string_view text = read_line();
                if (text == "00" || text == "01") {
                    push(Value::boolean(text == "01"));
                } else {
                    push(make_int_from_text(text));
                }
                return false;
            }
            case kLong: {
                std::string_view text = read_line();
                if (!text.empty() && text.back() == 'L') {
                    text.remove_suffix(1);
                }
                push(make_int_from_text(text));
                return false;
            }
            case kBinFloat: {
                std::uint64_t bits = 0;
                for (std::byte byte : take(8)) {  // big-endian, unlike every other field
                    bits = (bits << 8) | std::to_integer<std::uint8_t>(byte);
                }
                double value;
                std::memcpy(&value, &bits, sizeof value);
                push(Value::real(value));
                return false;
            }
            case kFloat: {
                std::string_view text = read_line();
                double value = 0;
                auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
                if (ec != std::errc() || end != text.data() + text.size()) {
                    fail("'" + std::string(text.substr(0, 40)) + "' is not a float");
                }
                push(Value::real(value));
                return false;
            }

            case kBinUnicode:
                push(make_str(std::string(as_string_view(take(read_le<std::uint32_t>())))));
                return false;
            case kShortBinUnicode:
                push(make_str(std::string(as_string_view(take(read_u8())))));
                return false;
            case kBinUnicode8:
                push(make_str(std::string(as_string_view(take(read_le<std::uint64_t>())))));
                return false;
            case kShortBinString:
                push(make_str(std::string(as_string_view(take(read_u8())))));
                return false;
            case kBinString: {
                auto length = static_cast<std::int32_t>(read_le<std::uint32_t>());
                if (length < 0) {
                    fail("negative string length");
                }
                push(make_str(
                    std::string(as_string_view(take(static_cast<std::uint64_t>(length))))));
                return false;
            }
            case kString:
                push(make_str(decode_quoted(read_line())));
                return false;
            case kUnicode:
                push(make_str(decode_raw_unicode_escape(read_line())));
                return false;
            case kBinBytes:
                push(make_bytes(std::string(as_string_view(take(read_le<std::uint32_t>())))));
                return false;
            case kShortBinBytes:
                push(make_bytes(std::string(as_string_view(take(read_u8())))));
                return false;
            case kBinBytes8:
            case kByteArray8:
                push(make_bytes(std::string(as_string_view(take(read_le<std::uint64_t>())))));
                return false;

            case kEmptyDict:
                push(make_dict(false));
                return false;
            case kEmptyList:
                push(make_sequence<List>({}));
                return false;
            case kEmptyTuple:
                push(make_sequence<Tuple>({}));
                return false;
            case kEmptySet:
                push(make_sequence<Set>({}));
                return false;
            case kTuple:
                push(make_sequence<Tuple>(pop_mark()));
                return false;
            case kList:
                push(make_sequence<List>(pop_mark()));
                return false;
            case kFrozenSet:
                push(make_sequence<Set>(pop_mark()));
                return false;
            case kTuple1: {
                Value a = pop();
                push(make_sequence<Tuple>({a}));
                return false;
            }
            case kTuple2: {
                Value b = pop();
                Value a = pop();
                push(make_sequence<Tuple>({a, b}));
                return false;
            }
            case kTuple3: {
                Value c = pop();
                Value b = pop();
                Value a = pop();
                push(make_sequence<Tuple>({a, b, c}));
                return false;
            }
            case kDict: {
                std::vector<Value> items = pop_mark();
                push(make_dict(false));
                set_items(std::move(items));
                return false;
            }
            case kAppend:
                append_items({pop()});
                return false;
            case kAppends:
                append_items(pop_mark());
                return false;
            case kSetItem: {
                Value value = pop();
                Value key = pop();
                set_items({key, value});
                return false;
            }
            case kSetItems:
                set_items(pop_mark());
                return false;
            case kAddItems: {
                std::vector<Value> items = pop_mark();
                Value& target = top();
                if (target.get<Set>() == nullptr) {
                    fail("ADDITEMS applied to " + describe_type(target));
                }
                auto* set = static_cast<Set*>(target.as_object());
                for (const Value& item : items) {
                    grow_depth(set, item);
                    set->items.push_back(item);
                }
                return false;
            }

            case kBinPut:
                memo_put(read_u8());
                return false;
            case kLongBinPut:
                memo_put(read_le<std::uint32_t>());
                return false;
            case kPut:
                memo_put(parse_memo_index(read_line()));
                return false;
            case kMemoize:
                memo_put(memo_.size());
                return false;
            case kBinGet:
                memo_get(read_u8());
                return false;
            case kLongBinGet:
                memo_get(read_le<std::uint32_t>());
                return false;
            case kGet:
                memo_get(parse_memo_index(read_line()));
                return false;

            case kGlobal: {
                std::string module(read_line());
                std::string name(read_line());
                push(make_global(std::move(module), std::move(name)));
                return false;
            }
            case kStackGlobal: {
                Value name = pop();
                Value module = pop();
                if (!name.string() || !module.string()) {
                    fail("module and name must be strings");
                }
                charge_copy(module.string()->size() + name.string()->size());
                push(make_global(std::string(*module.string()), std::string(*name.string())));
                return false;
            }
            case kReduce: {
                Value args = pop();
                Value callable = pop();
                push(reduce(callable, args));
                return false;
            }
            case kNewObj: {
                Value args = pop();
                Value cls = pop();
                push(make_instance(cls, args, true));
                return false;
            }
            case kNewObjEx: {
                Value kwargs = pop();
                Value args = pop();
                Value cls = pop();
                Value instance = make_instance(cls, args, true);
                static_cast<Instance*>(instance.as_object())->kwargs = kwargs;
                push(instance);
                return false;
            }
            case kInst: {
                std::string module(read_line());
                std::string name(read_line());
                Value args = make_sequence<Tuple>(pop_mark());
                push(make_instance(make_global(std::move(module), std::move(name)), args, false));
                return false;
            }
            case kObj: {
                std::vector<Value> items = pop_mark();
                if (items.empty()) {
                    fail("OBJ without a class");
                }
                Value cls = items.front();
                items.erase(items.begin());
                push(make_instance(cls, make_sequence<Tuple>(std::move(items)), false));
                return false;
            }
            case kBuild: {
                Value state = pop();
                build(state);
                return false;
            }
            case kBinPersId: {
                Value pid = pop();
                push(persistent_load(pid));
                return false;
            }
            case kPersId:
                fail("text persistent ids are not used by torch.save");
            case kExt1:
            case kExt2:
            case kExt4: {
                std::uint32_t code = op_ == kExt1   ? read_u8()
                                     : op_ == kExt2 ? read_le<std::uint16_t>()
                                                    : read_le<std::uint32_t>();
                fail("extension registry code " + std::to_string(code) + " is not registered");
            }
            case kNextBuffer:
                fail("out-of-band buffers are not supported");
            case kReadonlyBuffer:
                top();
                return false;
            default:
                fail("unknown opcode");
        }
    }

    std::span<const std::byte> data_;
    const std::string& source_;
    Limits limits_;
    bool data_may_continue_ = false;
    std::uint64_t copy_budget_ = kCopyUnitsPerInputByte * data_.size() + kCopyUnitsSlack;
    std::uint64_t copied_ = 0;
    std::size_t pos_ = 0;
    std::size_t op_offset_ = 0;
    std::uint8_t op_ = 0;
    std::vector<Value> stack_;
    std::vector<std::size_t> marks_;
    std::unordered_map<std::uint64_t, Value> memo_;
    std::unordered_map<std::string, Storage*> storages_;
    Document doc_;
};

}  // namespace

Document parse_pickle(std::span<const std::byte> data, const std::string& source,
                      const Limits& limits) {
    return Machine(data, source, limits).run();
}

std::optional<PicklePrefix> parse_pickle_prefix(std::span<const std::byte> data,
                                                const std::string& source, const Limits& limits) {
    Machine machine(data, source, limits, true);
    try {
        PicklePrefix prefix;
        prefix.document = machine.run();
        prefix.length = machine.consumed();
        return prefix;
    } catch (const EndOfData&) {
        return std::nullopt;
    }
}

}  // namespace z2f::pickle
