#include "pickle/pickle_writer.hpp"

#include <algorithm>
#include <bit>
#include <string>

#include "common/errors.hpp"

namespace z2f::pickle {
namespace {

// Opcodes (pickle.py names).
constexpr std::uint8_t kProto = 0x80;
constexpr std::uint8_t kStop = '.';
constexpr std::uint8_t kNone = 'N';
constexpr std::uint8_t kNewTrue = 0x88;
constexpr std::uint8_t kNewFalse = 0x89;
constexpr std::uint8_t kBinInt = 'J';
constexpr std::uint8_t kBinInt1 = 'K';
constexpr std::uint8_t kBinInt2 = 'M';
constexpr std::uint8_t kLong1 = 0x8a;
constexpr std::uint8_t kBinFloat = 'G';
constexpr std::uint8_t kBinUnicode = 'X';
constexpr std::uint8_t kGlobal = 'c';
constexpr std::uint8_t kEmptyTuple = ')';
constexpr std::uint8_t kEmptyList = ']';
constexpr std::uint8_t kEmptyDict = '}';
constexpr std::uint8_t kMark = '(';
constexpr std::uint8_t kTuple = 't';
constexpr std::uint8_t kTuple1 = 0x85;
constexpr std::uint8_t kTuple2 = 0x86;
constexpr std::uint8_t kTuple3 = 0x87;
constexpr std::uint8_t kSetItem = 's';
constexpr std::uint8_t kSetItems = 'u';
constexpr std::uint8_t kAppend = 'a';
constexpr std::uint8_t kAppends = 'e';
constexpr std::uint8_t kReduce = 'R';
constexpr std::uint8_t kNewObj = 0x81;
constexpr std::uint8_t kBuild = 'b';
constexpr std::uint8_t kBinPersId = 'Q';
constexpr std::uint8_t kBinPut = 'q';
constexpr std::uint8_t kLongBinPut = 'r';
constexpr std::uint8_t kBinGet = 'h';
constexpr std::uint8_t kLongBinGet = 'j';

// Python's pickler emits SETITEMS / APPENDS in batches of this many items.
constexpr std::size_t kBatchSize = 1000;

using Opcode = void (PickleWriter::*)();

void write_batched(PickleWriter& writer, std::size_t count, Opcode one, Opcode many,
                   const std::function<void(std::size_t)>& write_item) {
    for (std::size_t start = 0; start < count; start += kBatchSize) {
        std::size_t end = std::min(count, start + kBatchSize);
        if (end - start == 1) {
            write_item(start);
            (writer.*one)();
            continue;
        }
        writer.mark();
        for (std::size_t i = start; i < end; ++i) {
            write_item(i);
        }
        (writer.*many)();
    }
}

std::int64_t to_pickle_int(std::uint64_t value, const char* what) {
    if (value > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        throw_internal_error(std::string("pickle: ") + what + " does not fit in int64");
    }
    return static_cast<std::int64_t>(value);
}

void write_int_tuple(PickleWriter& writer, std::span<const std::uint64_t> values,
                     const char* what) {
    writer.begin_tuple(values.size());
    for (std::uint64_t value : values) {
        writer.integer(to_pickle_int(value, what));
    }
    writer.end_tuple(values.size());
}

}  // namespace

PickleWriter::PickleWriter(MemoPolicy policy) : policy_(policy) {
    op(kProto);
    out_.put_u8(2);
}

void PickleWriter::none() {
    op(kNone);
}

void PickleWriter::boolean(bool value) {
    op(value ? kNewTrue : kNewFalse);
}

void PickleWriter::integer(std::int64_t value) {
    if (value >= 0 && value <= 0xFF) {
        op(kBinInt1);
        out_.put_u8(static_cast<std::uint8_t>(value));
    } else if (value >= 0 && value <= 0xFFFF) {
        op(kBinInt2);
        out_.put(static_cast<std::uint16_t>(value));
    } else if (value >= std::numeric_limits<std::int32_t>::min() &&
               value <= std::numeric_limits<std::int32_t>::max()) {
        op(kBinInt);
        out_.put(static_cast<std::uint32_t>(static_cast<std::int32_t>(value)));
    } else {
        // Shortest two's complement, least significant byte first: stop once the remaining
        // value is pure sign extension of the last byte written.
        std::uint8_t bytes[8];
        std::size_t count = 0;
        std::int64_t rest = value;
        for (;;) {
            auto byte = static_cast<std::uint8_t>(static_cast<std::uint64_t>(rest) & 0xFFu);
            bytes[count++] = byte;
            rest >>= 8;  // arithmetic shift (C++20)
            bool sign_bit = (byte & 0x80u) != 0;
            if ((rest == 0 && !sign_bit) || (rest == -1 && sign_bit)) {
                break;
            }
        }
        op(kLong1);
        out_.put_u8(static_cast<std::uint8_t>(count));
        out_.put_bytes(std::as_bytes(std::span(bytes, count)));
    }
}

void PickleWriter::floating(double value) {
    op(kBinFloat);
    auto bits = std::bit_cast<std::uint64_t>(value);
    for (int shift = 56; shift >= 0; shift -= 8) {  // big-endian, unlike every other field
        out_.put_u8(static_cast<std::uint8_t>((bits >> shift) & 0xFFu));
    }
}

void PickleWriter::unicode_op(std::string_view utf8) {
    if (utf8.size() > std::numeric_limits<std::uint32_t>::max()) {
        throw_internal_error("pickle: string longer than 4 GiB");
    }
    op(kBinUnicode);
    out_.put(static_cast<std::uint32_t>(utf8.size()));
    out_.put_text(utf8);
}

void PickleWriter::unicode(std::string_view utf8) {
    unicode_op(utf8);
    memoize_like_python();
}

void PickleWriter::shared_unicode(std::string_view utf8) {
    if (auto it = memo_texts_.find(utf8); it != memo_texts_.end()) {
        memo_get(it->second);
        return;
    }
    unicode_op(utf8);
    memo_texts_.emplace(std::string(utf8), memo_put());
}

void PickleWriter::global(std::string_view module, std::string_view name) {
    if (module.empty() || name.empty() || module.find('\n') != std::string_view::npos ||
        name.find('\n') != std::string_view::npos) {
        throw_internal_error("pickle: invalid GLOBAL '" + std::string(module) + "' '" +
                             std::string(name) + "'");
    }
    std::string key;
    key.reserve(module.size() + 1 + name.size());
    key.append(module).append(1, '\n').append(name);
    if (auto it = memo_globals_.find(key); it != memo_globals_.end()) {
        memo_get(it->second);
        return;
    }
    op(kGlobal);
    out_.put_text(key);
    out_.put_u8('\n');
    memo_globals_.emplace(std::move(key), memo_put());
}

void PickleWriter::empty_tuple() {
    op(kEmptyTuple);
}
void PickleWriter::empty_list() {
    op(kEmptyList);
    memoize_like_python();
}
void PickleWriter::empty_dict() {
    op(kEmptyDict);
    memoize_like_python();
}
void PickleWriter::mark() {
    op(kMark);
}

void PickleWriter::begin_tuple(std::size_t count) {
    if (count > 3) {
        mark();
    }
}

void PickleWriter::end_tuple(std::size_t count) {
    switch (count) {
        case 0:
            op(kEmptyTuple);
            break;
        case 1:
            op(kTuple1);
            break;
        case 2:
            op(kTuple2);
            break;
        case 3:
            op(kTuple3);
            break;
        default:
            op(kTuple);
            break;
    }
    if (count > 0) {
        memoize_like_python();
    }
}

void PickleWriter::setitem() {
    op(kSetItem);
}
void PickleWriter::setitems() {
    op(kSetItems);
}
void PickleWriter::append() {
    op(kAppend);
}
void PickleWriter::appends() {
    op(kAppends);
}
void PickleWriter::reduce() {
    op(kReduce);
    memoize_like_python();
}
void PickleWriter::newobj() {
    op(kNewObj);
    memoize_like_python();
}
void PickleWriter::build() {
    op(kBuild);
}
void PickleWriter::binpersid() {
    op(kBinPersId);
}

std::uint32_t PickleWriter::memo_put() {
    std::uint32_t index = next_memo_++;
    if (index <= 0xFF) {
        op(kBinPut);
        out_.put_u8(static_cast<std::uint8_t>(index));
    } else {
        op(kLongBinPut);
        out_.put(index);
    }
    return index;
}

void PickleWriter::memo_get(std::uint32_t index) {
    if (index >= next_memo_) {
        throw_internal_error("pickle: BINGET of a memo entry never stored");
    }
    if (index <= 0xFF) {
        op(kBinGet);
        out_.put_u8(static_cast<std::uint8_t>(index));
    } else {
        op(kLongBinGet);
        out_.put(index);
    }
}

const std::uint32_t* PickleWriter::memo_lookup(const void* object) const {
    auto it = memo_objects_.find(object);
    return it == memo_objects_.end() ? nullptr : &it->second;
}

void PickleWriter::memo_remember(const void* object, std::uint32_t index) {
    memo_objects_.emplace(object, index);
}

std::vector<std::byte> PickleWriter::finish() {
    op(kStop);
    return out_.take();
}

void write_setitems(PickleWriter& writer, std::size_t count,
                    const std::function<void(std::size_t)>& write_item) {
    write_batched(writer, count, &PickleWriter::setitem, &PickleWriter::setitems, write_item);
}

void write_appends(PickleWriter& writer, std::size_t count,
                   const std::function<void(std::size_t)>& write_item) {
    write_batched(writer, count, &PickleWriter::append, &PickleWriter::appends, write_item);
}

std::vector<std::uint64_t> contiguous_strides(std::span<const std::uint64_t> shape) {
    std::vector<std::uint64_t> strides(shape.size());
    std::uint64_t step = 1;
    for (std::size_t i = shape.size(); i-- > 0;) {
        strides[i] = step;
        step *= std::max<std::uint64_t>(shape[i], 1);
    }
    return strides;
}

void write_storage(PickleWriter& writer, const StorageToWrite& storage) {
    std::string_view class_name = torch_storage_name(storage.dtype);
    if (class_name.empty()) {
        throw_unsupported("", "torch has no typed storage class for dtype " +
                                  std::string(dtype_display_name(storage.dtype)) +
                                  " (it would need _rebuild_tensor_v3, which older torch lacks)");
    }
    writer.mark();
    writer.shared_unicode("storage");
    writer.global("torch", class_name);
    writer.unicode(storage.key);
    writer.shared_unicode(storage.location);
    writer.integer(to_pickle_int(storage.numel, "storage numel"));
    writer.end_tuple(5);
    writer.binpersid();
}

void write_tensor_v2(PickleWriter& writer, const TensorToWrite& tensor) {
    writer.global("torch._utils", "_rebuild_tensor_v2");
    writer.mark();
    write_storage(writer, tensor.storage);
    writer.integer(to_pickle_int(tensor.storage_offset, "storage offset"));
    write_int_tuple(writer, tensor.shape, "tensor size");
    if (tensor.stride.empty() && !tensor.shape.empty()) {
        write_int_tuple(writer, contiguous_strides(tensor.shape), "tensor stride");
    } else {
        if (tensor.stride.size() != tensor.shape.size()) {
            throw_internal_error("pickle: tensor stride and size differ in rank");
        }
        write_int_tuple(writer, tensor.stride, "tensor stride");
    }
    writer.boolean(tensor.requires_grad);
    // backward_hooks: always an empty OrderedDict (torch never serializes hooks).
    writer.global("collections", "OrderedDict");
    writer.empty_tuple();
    writer.reduce();
    writer.end_tuple(6);
    writer.reduce();
}

// ----------------------------------------------------------------------------------------------
// PickleValue

void PickleValue::throw_int_range() {
    throw_internal_error("pickle: integer does not fit in int64");
}

PickleValue PickleValue::bytes(std::span<const std::byte> data) {
    PickleValue value;
    value.kind_ = Kind::kBytes;
    value.text_.assign(reinterpret_cast<const char*>(data.data()), data.size());
    return value;
}

PickleValue PickleValue::tuple(std::vector<PickleValue> items) {
    PickleValue value;
    value.kind_ = Kind::kTuple;
    value.items_ = std::move(items);
    return value;
}

PickleValue PickleValue::list(std::vector<PickleValue> items) {
    PickleValue value;
    value.kind_ = Kind::kList;
    value.items_ = std::move(items);
    return value;
}

namespace {
std::vector<PickleValue> flatten(PickleValue::Items items) {
    std::vector<PickleValue> flat;
    flat.reserve(items.size() * 2);
    for (auto& [key, item] : items) {
        flat.push_back(std::move(key));
        flat.push_back(std::move(item));
    }
    return flat;
}
}  // namespace

PickleValue PickleValue::dict(Items items) {
    PickleValue value;
    value.kind_ = Kind::kDict;
    value.items_ = flatten(std::move(items));
    return value;
}

PickleValue PickleValue::ordered_dict(Items items) {
    PickleValue value;
    value.kind_ = Kind::kOrderedDict;
    value.items_ = flatten(std::move(items));
    return value;
}

PickleValue PickleValue::global(std::string module, std::string name) {
    PickleValue value;
    value.kind_ = Kind::kGlobal;
    value.text_ = std::move(module);
    value.name_ = std::move(name);
    return value;
}

PickleValue PickleValue::reduce(PickleValue callable, PickleValue args) {
    PickleValue value;
    value.kind_ = Kind::kReduce;
    value.items_.push_back(std::move(callable));
    value.items_.push_back(std::move(args));
    return value;
}

PickleValue PickleValue::newobj(PickleValue cls, PickleValue args) {
    PickleValue value;
    value.kind_ = Kind::kNewObj;
    value.items_.push_back(std::move(cls));
    value.items_.push_back(std::move(args));
    return value;
}

PickleValue PickleValue::build(PickleValue object, PickleValue state) {
    PickleValue value;
    value.kind_ = Kind::kBuild;
    value.items_.push_back(std::move(object));
    value.items_.push_back(std::move(state));
    return value;
}

PickleValue PickleValue::object(PickleValue cls, PickleValue state) {
    return build(newobj(std::move(cls), tuple({})), std::move(state));
}

PickleValue PickleValue::persistent_id(PickleValue id) {
    PickleValue value;
    value.kind_ = Kind::kPersistentId;
    value.items_.push_back(std::move(id));
    return value;
}

PickleValue PickleValue::tensor(TensorToWrite tensor) {
    PickleValue value;
    value.kind_ = Kind::kTensor;
    value.tensor_ = std::make_shared<const TensorToWrite>(std::move(tensor));
    return value;
}

PickleValue PickleValue::storage(StorageToWrite storage) {
    TensorToWrite holder;
    holder.storage = std::move(storage);
    PickleValue value;
    value.kind_ = Kind::kStorage;
    value.tensor_ = std::make_shared<const TensorToWrite>(std::move(holder));
    return value;
}

PickleValue PickleValue::int_tuple(std::span<const std::uint64_t> values) {
    std::vector<PickleValue> items;
    items.reserve(values.size());
    for (std::uint64_t v : values) {
        items.emplace_back(v);
    }
    return tuple(std::move(items));
}

PickleValue PickleValue::torch_size(std::span<const std::uint64_t> dims) {
    return reduce(global("torch", "Size"), tuple({int_tuple(dims)}));
}

PickleValue PickleValue::shared(std::shared_ptr<const PickleValue> value) {
    if (!value) {
        throw_internal_error("pickle: PickleValue::shared of a null pointer");
    }
    PickleValue result;
    result.kind_ = Kind::kShared;
    result.shared_ = std::move(value);
    return result;
}

void PickleValue::write_tuple_items(PickleWriter& writer) const {
    writer.begin_tuple(items_.size());
    for (const PickleValue& item : items_) {
        item.write(writer);
    }
    writer.end_tuple(items_.size());
}

namespace {

// Latin-1 bytes as the UTF-8 text Python's str(b, 'latin1') holds.
std::string latin1_to_utf8(std::string_view raw) {
    std::string text;
    text.reserve(raw.size());
    for (char c : raw) {
        auto byte = static_cast<unsigned char>(c);
        if (byte < 0x80) {
            text.push_back(c);
        } else {
            text.push_back(static_cast<char>(0xC0 | (byte >> 6)));
            text.push_back(static_cast<char>(0x80 | (byte & 0x3F)));
        }
    }
    return text;
}

}  // namespace

void PickleValue::write(PickleWriter& writer) const {
    switch (kind_) {
        case Kind::kNone:
            writer.none();
            return;
        case Kind::kBool:
            writer.boolean(int_ != 0);
            return;
        case Kind::kInt:
            writer.integer(int_);
            return;
        case Kind::kFloat:
            writer.floating(float_);
            return;
        case Kind::kString:
            writer.unicode(text_);
            return;
        case Kind::kBytes:
            if (text_.empty()) {
                writer.global("__builtin__", "bytes");
                writer.empty_tuple();
            } else {
                writer.global("_codecs", "encode");
                writer.unicode(latin1_to_utf8(text_));
                writer.shared_unicode("latin1");
                writer.end_tuple(2);
            }
            writer.reduce();
            return;
        case Kind::kTuple:
            write_tuple_items(writer);
            return;
        case Kind::kList:
            writer.empty_list();
            write_appends(writer, items_.size(), [&](std::size_t i) { items_[i].write(writer); });
            return;
        case Kind::kDict:
        case Kind::kOrderedDict:
            if (kind_ == Kind::kDict) {
                writer.empty_dict();
            } else {
                writer.global("collections", "OrderedDict");
                writer.empty_tuple();
                writer.reduce();
            }
            write_setitems(writer, items_.size() / 2, [&](std::size_t i) {
                items_[2 * i].write(writer);
                items_[2 * i + 1].write(writer);
            });
            return;
        case Kind::kGlobal:
            writer.global(text_, name_);
            return;
        case Kind::kReduce:
        case Kind::kNewObj:
            // Anything but a tuple would make the unpickler fail at REDUCE / NEWOBJ time, far
            // from the code that built the value.
            if (part(1).resolved_kind() != Kind::kTuple) {
                throw_internal_error("pickle: REDUCE/NEWOBJ arguments must be a tuple");
            }
            part(0).write(writer);
            part(1).write(writer);
            kind_ == Kind::kReduce ? writer.reduce() : writer.newobj();
            return;
        case Kind::kBuild:
            part(0).write(writer);
            part(1).write(writer);
            writer.build();
            return;
        case Kind::kPersistentId:
            part(0).write(writer);
            writer.binpersid();
            return;
        case Kind::kTensor:
            write_tensor_v2(writer, *tensor_);
            return;
        case Kind::kStorage:
            write_storage(writer, tensor_->storage);
            return;
        case Kind::kShared:
            if (const std::uint32_t* index = writer.memo_lookup(shared_.get())) {
                writer.memo_get(*index);
            } else {
                shared_->write(writer);
                writer.memo_remember(shared_.get(), writer.memo_put());
            }
            return;
    }
}

std::vector<std::byte> dump(const PickleValue& value) {
    PickleWriter writer;
    value.write(writer);
    return writer.finish();
}

}  // namespace z2f::pickle
