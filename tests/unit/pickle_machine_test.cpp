#include <cstring>
#include <optional>
#include <sstream>

#include <gtest/gtest.h>

#include "common/errors.hpp"
#include "container/torch_file.hpp"
#include "pickle/machine.hpp"
#include "pickle/printer.hpp"
#include "support/test_files.hpp"

namespace z2f::pickle {
namespace {

using namespace std::string_literals;  // "..."s keeps embedded NUL bytes

// --- tiny pickle assembler -----------------------------------------------------------------
std::string le(std::uint64_t value, int bytes) {
    std::string out;
    for (int i = 0; i < bytes; ++i)
        out += static_cast<char>((value >> (8 * i)) & 0xFF);
    return out;
}
std::string u(const std::string& text) {
    return "X" + le(text.size(), 4) + text;
}  // BINUNICODE
std::string k(int value) {
    return "K" + std::string(1, static_cast<char>(value));
}  // BININT1
std::string global(const std::string& module, const std::string& name) {
    return "c" + module + "\n" + name + "\n";
}
std::string stop() {
    return ".";
}
const std::string kProto2 = "\x80\x02";

struct Parsed {
    Document doc;
    const Value& root() const { return doc.root(); }
};

Parsed parse(const std::string& bytes) {
    return {parse_pickle(std::as_bytes(std::span(bytes.data(), bytes.size())), "test.pkl")};
}

std::string parse_error(const std::string& bytes, const Limits& limits = {}) {
    try {
        parse_pickle(std::as_bytes(std::span(bytes.data(), bytes.size())), "test.pkl", limits);
    } catch (const Error& error) {
        EXPECT_EQ(error.kind(), ErrorKind::kInput);
        return error.what();
    }
    return "";
}

std::string storage_pid(const std::string& type, const std::string& key, int numel) {
    return "(" + u("storage") + global("torch", type) + u(key) + u("cpu") + k(numel) + "tQ";
}
std::string tensor_v2(const std::string& storage, int offset, const std::string& size,
                      const std::string& stride, const std::string& extra = "") {
    return global("torch._utils", "_rebuild_tensor_v2") + "(" + storage + k(offset) + size +
           stride + "\x89" + global("collections", "OrderedDict") + ")R" + extra + "tR";
}

// --- scalars ---------------------------------------------------------------------------------
TEST(PickleMachine, Integers) {
    EXPECT_EQ(parse(kProto2 + "J" + le(static_cast<std::uint32_t>(-5), 4) + stop()).root().as_int(),
              -5);
    EXPECT_EQ(parse(kProto2 + k(200) + stop()).root().as_int(), 200);
    EXPECT_EQ(parse(kProto2 + "M" + le(65000, 2) + stop()).root().as_int(), 65000);
    EXPECT_EQ(parse("I123\n.").root().as_int(), 123);
    EXPECT_TRUE(parse("I01\n.").root().is_bool());
    EXPECT_TRUE(parse("I01\n.").root().as_bool());
    EXPECT_EQ(parse("L-9000000000L\n.").root().as_int(), -9000000000);
}

TEST(PickleMachine, Long1IsSignedAndSizedByItsLength) {
    EXPECT_EQ(parse(kProto2 + "\x8a" + std::string(1, '\0') + stop()).root().as_int(), 0);
    // 7e9 (a 7B-parameter storage numel) needs LONG1.
    EXPECT_EQ(parse(kProto2 + "\x8a\x05" + le(7000000000ULL, 5) + stop()).root().as_int(),
              7000000000);
    EXPECT_EQ(parse(kProto2 + "\x8a\x01\xff" + stop()).root().as_int(), -1);
    EXPECT_EQ(parse(kProto2 + "\x8a\x02\x00\x80"s + stop()).root().as_int(), -32768);
    EXPECT_EQ(parse(kProto2 + "\x8a\x03\x00\x80\x00"s + stop()).root().as_int(), 32768);
    // 9 bytes whose top byte is only sign extension still fit.
    EXPECT_EQ(
        parse(kProto2 + "\x8a\x09" + le(0x7FFFFFFFFFFFFFFFULL, 8) + std::string(1, '\0') + stop())
            .root()
            .as_int(),
        0x7FFFFFFFFFFFFFFF);
    EXPECT_EQ(parse(kProto2 + "\x8b" + le(3, 4) + "\x01\x00\x00"s + stop()).root().as_int(), 1);
}

TEST(PickleMachine, IntegersBeyond64BitsBecomeBigInts) {
    auto parsed = parse(kProto2 + "\x8a\x09" + le(0, 8) + "\x01" + stop());  // 2^64
    const BigInt* big = parsed.root().get<BigInt>();
    ASSERT_NE(big, nullptr);
    EXPECT_EQ(big->le_bytes.size(), 9u);
    auto text = parse("L123456789012345678901234567890L\n.");
    ASSERT_NE(text.root().get<BigInt>(), nullptr);
    EXPECT_EQ(text.root().get<BigInt>()->decimal, "123456789012345678901234567890");
    EXPECT_EQ(describe_type(text.root()), "int (beyond 64 bits)");
}

TEST(PickleMachine, FloatsAndConstants) {
    // BINFLOAT is big-endian: 1.5 = 0x3FF8000000000000.
    EXPECT_DOUBLE_EQ(parse(kProto2 + "G\x3f\xf8" + std::string(6, '\0') + stop()).root().as_float(),
                     1.5);
    EXPECT_DOUBLE_EQ(parse("F-0.25\n.").root().as_float(), -0.25);
    EXPECT_TRUE(parse(kProto2 + "N.").root().is_none());
    EXPECT_TRUE(parse(kProto2 + "\x88.").root().as_bool());
    EXPECT_FALSE(parse(kProto2 + "\x89.").root().as_bool());
}

TEST(PickleMachine, Strings) {
    EXPECT_EQ(parse(kProto2 + u("héllo") + stop()).root().string(), "héllo");
    EXPECT_EQ(parse("\x80\x04\x8c\x03"
                    "abc.")
                  .root()
                  .string(),
              "abc");
    EXPECT_EQ(parse("\x80\x04\x8d" + le(2, 8) + "hi.").root().string(), "hi");
    EXPECT_EQ(parse("U\x02ok.").root().string(), "ok");
    EXPECT_EQ(parse("T" + le(3, 4) + "abc.").root().string(), "abc");
    EXPECT_EQ(parse("S'a\\nb\\x41'\n.").root().string(), "a\nbA");
    EXPECT_EQ(parse("Vcaf\\u00e9\n.").root().string(), "café");
    EXPECT_NE(parse_error(kProto2 + "X" + le(2, 4) + "\xff\xfe.").find("not valid UTF-8"),
              std::string::npos);
}

TEST(PickleMachine, Bytes) {
    EXPECT_EQ(parse("\x80\x03"
                    "C\x03"
                    "abc.")
                  .root()
                  .get<Bytes>()
                  ->data,
              "abc");
    EXPECT_EQ(parse("\x80\x03"
                    "B" +
                    le(2, 4) + "xy.")
                  .root()
                  .get<Bytes>()
                  ->data,
              "xy");
    EXPECT_EQ(parse("\x80\x04\x8e" + le(1, 8) + "z.").root().get<Bytes>()->data, "z");
    EXPECT_EQ(parse("\x80\x05\x96" + le(1, 8) + "q.").root().get<Bytes>()->data, "q");
    // Protocol 2 pickles bytes as _codecs.encode(text, 'latin1').
    auto encoded =
        parse(kProto2 + global("_codecs", "encode") + u("\xc3\xbf\x01") + u("latin1") + "\x86R.");
    ASSERT_NE(encoded.root().get<Bytes>(), nullptr);
    EXPECT_EQ(encoded.root().get<Bytes>()->data, std::string("\xff\x01"));
}

// --- containers ------------------------------------------------------------------------------
TEST(PickleMachine, TuplesListsDicts) {
    auto t = parse(kProto2 + k(1) + k(2) + k(3) + "\x87.");
    ASSERT_NE(t.root().get<Tuple>(), nullptr);
    EXPECT_EQ(t.root().get<Tuple>()->items.size(), 3u);
    EXPECT_EQ(parse(kProto2 + k(1) + "\x85.").root().get<Tuple>()->items.size(), 1u);
    EXPECT_EQ(parse(kProto2 + k(1) + k(2) + "\x86.").root().get<Tuple>()->items.size(), 2u);
    EXPECT_EQ(
        parse(kProto2 + "(" + k(1) + k(2) + k(3) + k(4) + "t.").root().get<Tuple>()->items.size(),
        4u);
    EXPECT_EQ(parse(kProto2 + ").").root().get<Tuple>()->items.size(), 0u);
    EXPECT_EQ(parse("(" + k(1) + k(2) + "l.").root().get<List>()->items.size(), 2u);
    auto list = parse(kProto2 + "]" + k(1) + "a(" + k(2) + k(3) + "e.");
    ASSERT_NE(list.root().get<List>(), nullptr);
    EXPECT_EQ(list.root().get<List>()->items.size(), 3u);
    EXPECT_EQ(list.root().get<List>()->items[2].as_int(), 3);

    auto dict = parse(kProto2 + "}" + u("b") + k(2) + "s(" + u("a") + k(1) + u("c") + k(3) + "u.");
    const Dict* d = dict.root().get<Dict>();
    ASSERT_NE(d, nullptr);
    ASSERT_EQ(d->items.size(), 3u);
    // Insertion order is kept: it is the data layout of param_shapes.
    EXPECT_EQ(d->items[0].first.string(), "b");
    EXPECT_EQ(d->items[1].first.string(), "a");
    EXPECT_EQ(d->find("c")->as_int(), 3);
    EXPECT_EQ(d->find("zz"), nullptr);
    EXPECT_EQ(parse("(" + u("k") + k(9) + "d.").root().get<Dict>()->find("k")->as_int(), 9);
}

TEST(PickleMachine, Sets) {
    auto set = parse("\x80\x04\x8f(" + k(1) + k(2) + "\x90.");
    ASSERT_NE(set.root().get<Set>(), nullptr);
    EXPECT_EQ(set.root().get<Set>()->items.size(), 2u);
    EXPECT_EQ(parse("\x80\x04(" + k(1) + "\x91.").root().get<Set>()->items.size(), 1u);
    auto builtin = parse(kProto2 + global("__builtin__", "set") + "]" + k(4) + "a\x85R.");
    ASSERT_NE(builtin.root().get<Set>(), nullptr);
    EXPECT_EQ(builtin.root().get<Set>()->items.size(), 1u);
}

TEST(PickleMachine, StackOpcodes) {
    EXPECT_EQ(parse(kProto2 + k(1) + k(2) + "0.").root().as_int(), 1);               // POP
    EXPECT_EQ(parse(kProto2 + k(1) + "(" + k(2) + k(3) + "1.").root().as_int(), 1);  // POP_MARK
    auto dup = parse(kProto2 + "]2\x86.");                                           // DUP
    const Tuple* pair = dup.root().get<Tuple>();
    ASSERT_NE(pair, nullptr);
    EXPECT_EQ(pair->items[0].as_object(), pair->items[1].as_object());
}

TEST(PickleMachine, MemoSharesObjects) {
    auto parsed = parse(kProto2 + "]q\x05h\x05h\x05\x87.");  // BINPUT 5, BINGET 5 twice
    const Tuple* t = parsed.root().get<Tuple>();
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->items[0].as_object(), t->items[1].as_object());
    EXPECT_EQ(t->items[1].as_object(), t->items[2].as_object());
    EXPECT_NE(
        parse(kProto2 + "]r" + le(70000, 4) + "j" + le(70000, 4) + "\x86.").root().get<Tuple>(),
        nullptr);
    EXPECT_EQ(parse("]p3\ng3\n\x86.").root().get<Tuple>()->items.size(), 2u);
    EXPECT_EQ(parse("\x80\x04]\x94h\x00\x86."s).root().get<Tuple>()->items.size(), 2u);  // MEMOIZE
    EXPECT_NE(parse_error(kProto2 + "h\x07.").find("memo key 7 is not defined"), std::string::npos);
}

// --- objects ---------------------------------------------------------------------------------
TEST(PickleMachine, UnknownCallablesStayInert) {
    auto parsed = parse(kProto2 + global("os", "system") + u("rm -rf /") + "\x85R.");
    const Instance* instance = parsed.root().get<Instance>();
    ASSERT_NE(instance, nullptr);
    ASSERT_NE(instance->global(), nullptr);
    EXPECT_TRUE(instance->global()->is("os", "system"));
    EXPECT_EQ(instance->args.get<Tuple>()->items[0].string(), "rm -rf /");
}

TEST(PickleMachine, NewObjBuildAndItems) {
    // LossScaler: GLOBAL cls; EMPTY_TUPLE; NEWOBJ; {state}; BUILD
    auto parsed = parse(kProto2 + global("deepspeed.runtime.fp16.loss_scaler", "LossScaler") +
                        ")\x81}(" + u("cur_scale") + "G\x3f\xf0" + std::string(6, '\0') + "ub.");
    const Instance* scaler = parsed.root().get<Instance>();
    ASSERT_NE(scaler, nullptr);
    EXPECT_TRUE(scaler->via_newobj);
    ASSERT_NE(scaler->state.get<Dict>(), nullptr);
    EXPECT_DOUBLE_EQ(scaler->state.get<Dict>()->find("cur_scale")->as_float(), 1.0);

    auto with_items =
        parse(kProto2 + global("m", "C") + ")\x81" + k(1) + "a" + u("x") + k(2) + "s.");
    const Instance* c = with_items.root().get<Instance>();
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->list_items.size(), 1u);
    EXPECT_EQ(c->dict_items.size(), 1u);

    auto ex = parse("\x80\x04" + global("m", "C") + ")}\x92.");
    EXPECT_NE(ex.root().get<Instance>(), nullptr);
    auto inst = parse("(" + k(1) + "im\nC\n.");
    ASSERT_NE(inst.root().get<Instance>(), nullptr);
    EXPECT_EQ(inst.root().get<Instance>()->args.get<Tuple>()->items.size(), 1u);
    auto obj = parse("(" + global("m", "C") + k(1) + "o.");
    ASSERT_NE(obj.root().get<Instance>(), nullptr);
    auto stack_global = parse(
        "\x80\x04\x8c\x01"
        "m\x8c\x01"
        "C\x93.");
    ASSERT_NE(stack_global.root().get<Global>(), nullptr);
    EXPECT_TRUE(stack_global.root().get<Global>()->is("m", "C"));
}

TEST(PickleMachine, ZeroStageEnumInBothEncodings) {
    // Python <= 3.10 / >= 3.12: ZeroStageEnum(3)
    auto by_value =
        parse(kProto2 + global("deepspeed.runtime.zero.config", "ZeroStageEnum") + k(3) + "\x85R.");
    const Instance* value_form = by_value.root().get<Instance>();
    ASSERT_NE(value_form, nullptr);
    EXPECT_EQ(value_form->global()->name, "ZeroStageEnum");
    EXPECT_EQ(value_form->args.get<Tuple>()->items[0].as_int(), 3);
    // Python 3.11: getattr(ZeroStageEnum, 'weights')
    auto by_name =
        parse(kProto2 + global("__builtin__", "getattr") +
              global("deepspeed.runtime.zero.config", "ZeroStageEnum") + u("weights") + "\x86R.");
    const Instance* name_form = by_name.root().get<Instance>();
    ASSERT_NE(name_form, nullptr);
    EXPECT_TRUE(name_form->global()->is("__builtin__", "getattr"));
    EXPECT_EQ(name_form->args.get<Tuple>()->items[1].string(), "weights");
}

TEST(PickleMachine, OrderedDictWithMetadataBuild) {
    auto parsed = parse(kProto2 + global("collections", "OrderedDict") + ")R(" + u("w") + k(1) +
                        u("b") + k(2) + "u}(" + u("_metadata") + "}ub.");
    const Dict* dict = parsed.root().get<Dict>();
    ASSERT_NE(dict, nullptr);
    EXPECT_TRUE(dict->ordered);
    EXPECT_EQ(dict->items.size(), 2u);
    EXPECT_NE(dict->state.get<Dict>(), nullptr);
    EXPECT_EQ(describe_type(parsed.root()), "OrderedDict");
}

TEST(PickleMachine, TorchSizeBecomesATuple) {
    auto parsed = parse(kProto2 + global("torch", "Size") + k(53) + k(37) + "\x86\x85R.");
    const Tuple* shape = parsed.root().get<Tuple>();
    ASSERT_NE(shape, nullptr);
    ASSERT_EQ(shape->items.size(), 2u);
    EXPECT_EQ(shape->items[0].as_int(), 53);
    EXPECT_NE(
        parse_error(kProto2 + global("torch", "Size") + "J" + le(0xFFFFFFFF, 4) + "\x85\x85R.")
            .find("non-negative"),
        std::string::npos);
}

// --- torch tensors ---------------------------------------------------------------------------
TEST(PickleMachine, RebuildTensorV2) {
    auto parsed = parse(kProto2 +
                        tensor_v2(storage_pid("FloatStorage", "3", 100), 7, k(3) + k(4) + "\x86",
                                  k(4) + k(1) + "\x86") +
                        stop());
    const Tensor* tensor = parsed.root().get<Tensor>();
    ASSERT_NE(tensor, nullptr);
    EXPECT_EQ(tensor->dtype, DType::kF32);
    EXPECT_EQ(tensor->storage->key, "3");
    EXPECT_EQ(tensor->storage->numel, 100u);
    EXPECT_EQ(tensor->storage_offset, 7u);
    EXPECT_EQ(tensor->shape, (std::vector<std::uint64_t>{3, 4}));
    EXPECT_EQ(tensor->stride, (std::vector<std::int64_t>{4, 1}));
    // 7-argument form (metadata) and a 0-dim tensor.
    auto scalar = parse(
        kProto2 + tensor_v2(storage_pid("BFloat16Storage", "0", 1), 0, ")", ")", "}") + stop());
    ASSERT_NE(scalar.root().get<Tensor>(), nullptr);
    EXPECT_TRUE(scalar.root().get<Tensor>()->shape.empty());
    EXPECT_EQ(scalar.root().get<Tensor>()->dtype, DType::kBF16);
}

TEST(PickleMachine, RebuildTensorV3TakesItsDtypeArgument) {
    std::string v3 = global("torch._utils", "_rebuild_tensor_v3") + "(" +
                     storage_pid("UntypedStorage", "0", 16) + k(0) + k(8) + "\x85" + k(1) + "\x85" +
                     "\x89" + global("collections", "OrderedDict") + ")R" +
                     global("torch", "uint16") + "tR.";
    auto parsed = parse(kProto2 + v3);
    const Tensor* tensor = parsed.root().get<Tensor>();
    ASSERT_NE(tensor, nullptr);
    EXPECT_EQ(tensor->dtype, DType::kU16);
    EXPECT_FALSE(tensor->storage->dtype.has_value());
}

TEST(PickleMachine, RebuildFromTypeV2UnwrapsTheTensor) {
    // torch >= 2: _rebuild_from_type_v2(_rebuild_tensor_v2, Tensor, (args), {'ds_id': ...})
    std::string args = "(" + storage_pid("FloatStorage", "3", 10) + k(0) + k(10) + "\x85" + k(1) +
                       "\x85" + "\x88" + global("collections", "OrderedDict") + ")Rt";
    std::string wrapped = global("torch._tensor", "_rebuild_from_type_v2") + "(" +
                          global("torch._utils", "_rebuild_tensor_v2") + global("torch", "Tensor") +
                          args + "}" + u("ds_id") + u("0_9") + "stR.";
    auto parsed = parse(kProto2 + wrapped);
    const Tensor* tensor = parsed.root().get<Tensor>();
    ASSERT_NE(tensor, nullptr);
    EXPECT_EQ(tensor->shape, (std::vector<std::uint64_t>{10}));
    EXPECT_TRUE(tensor->requires_grad);
}

TEST(PickleMachine, RebuildParameterReturnsItsTensor) {
    std::string tensor =
        tensor_v2(storage_pid("HalfStorage", "1", 4), 0, k(4) + "\x85", k(1) + "\x85");
    auto parsed = parse(kProto2 + global("torch._utils", "_rebuild_parameter") + "(" + tensor +
                        "\x88" + global("collections", "OrderedDict") + ")RtR.");
    ASSERT_NE(parsed.root().get<Tensor>(), nullptr);
    EXPECT_EQ(parsed.root().get<Tensor>()->dtype, DType::kF16);
}

TEST(PickleMachine, StoragesAreSharedByKeyAndChecked) {
    std::string a = tensor_v2(storage_pid("FloatStorage", "0", 8), 0, k(4) + "\x85", k(1) + "\x85");
    std::string b = tensor_v2(storage_pid("FloatStorage", "0", 8), 4, k(4) + "\x85", k(1) + "\x85");
    auto parsed = parse(kProto2 + a + b + "\x86.");
    const Tuple* pair = parsed.root().get<Tuple>();
    ASSERT_NE(pair, nullptr);
    EXPECT_EQ(pair->items[0].get<Tensor>()->storage, pair->items[1].get<Tensor>()->storage);
    std::string c = tensor_v2(storage_pid("HalfStorage", "0", 8), 0, k(4) + "\x85", k(1) + "\x85");
    EXPECT_NE(parse_error(kProto2 + a + c + "\x86.").find("different type or size"),
              std::string::npos);
    EXPECT_NE(parse_error(kProto2 + storage_pid("NoSuchStorage", "0", 1) + ".")
                  .find("unknown storage type torch.NoSuchStorage"),
              std::string::npos);
    EXPECT_NE(parse_error(kProto2 + u("x") + "Q.").find("expected the tuple ('storage'"),
              std::string::npos);
}

TEST(PickleMachine, StorageViewMetadataIsRefused) {
    // The legacy format's sixth element: None is accepted, a view of a root storage is not.
    std::string with_none =
        "(" + u("storage") + global("torch", "FloatStorage") + u("0") + u("cpu") + k(4) + "NtQ";
    EXPECT_NE(parse(kProto2 + with_none + ".").root().get<pickle::Storage>(), nullptr);
    std::string with_view = "(" + u("storage") + global("torch", "FloatStorage") + u("0") +
                            u("cpu") + k(4) + "(" + u("1") + k(0) + k(2) + "ttQ";
    EXPECT_NE(parse_error(kProto2 + with_view + ".").find("view metadata"), std::string::npos);
}

std::optional<PicklePrefix> prefix_of(const std::string& bytes) {
    return parse_pickle_prefix(std::as_bytes(std::span(bytes.data(), bytes.size())), "stream");
}

TEST(PickleMachine, PrefixParsingStopsAtStopAndAsksForMore) {
    // Two pickles back to back, then raw bytes: the first one's length is its own.
    const std::string first = kProto2 + k(7) + ".";
    const std::string second = kProto2 + "]" + k(1) + "a.";
    std::optional<PicklePrefix> prefix = prefix_of(first + second + "\xff\xfe");
    ASSERT_TRUE(prefix.has_value());
    EXPECT_EQ(prefix->length, first.size());
    EXPECT_EQ(prefix->document.root().as_int(), 7);
    prefix = prefix_of(second + "raw");
    ASSERT_TRUE(prefix.has_value());
    EXPECT_EQ(prefix->length, second.size());
    // Every cut of a pickle short of its STOP asks for more bytes instead of failing: argument
    // bytes, a text line, a frame and the STOP itself may all be missing.
    const std::string framed = "\x80\x04\x95" + le(13, 8) + "\x8c\x05hello" + "I12\n" + "\x86.";
    ASSERT_TRUE(prefix_of(framed).has_value());
    for (const std::string& whole : {first, second, framed, kProto2 + u("text") + "."}) {
        for (std::size_t cut = 0; cut < whole.size(); ++cut)
            EXPECT_FALSE(prefix_of(whole.substr(0, cut)).has_value()) << cut;
    }
    // Malformed bytes are errors all the same, named by their offset.
    try {
        prefix_of(kProto2 + "\xff.");
        ADD_FAILURE() << "an unknown opcode parsed";
    } catch (const Error& error) {
        EXPECT_NE(std::string(error.what()).find("byte 2"), std::string::npos) << error.what();
    }
}

TEST(PickleMachine, MalformedTensorCallsAreErrors) {
    std::string bad_size = tensor_v2(storage_pid("FloatStorage", "0", 8), 0, u("x"), k(1) + "\x85");
    EXPECT_NE(parse_error(kProto2 + bad_size + ".").find("tensor size is str"), std::string::npos);
    std::string mismatch =
        tensor_v2(storage_pid("FloatStorage", "0", 8), 0, k(2) + k(2) + "\x86", k(1) + "\x85");
    EXPECT_NE(parse_error(kProto2 + mismatch + ".").find("stride has 1"), std::string::npos);
    std::string not_storage = global("torch._utils", "_rebuild_tensor_v2") + "(" + k(1) + k(0) +
                              ")))" + "\x89" + "Nt" + "R.";
    EXPECT_NE(parse_error(kProto2 + not_storage).find("expected a storage"), std::string::npos);
}

// --- errors and limits -------------------------------------------------------------------------
TEST(PickleMachine, ErrorsNameOpcodeAndOffset) {
    std::string message = parse_error(kProto2 + "a.");
    EXPECT_NE(message.find("test.pkl: byte 2: APPEND: stack underflow"), std::string::npos)
        << message;
    EXPECT_NE(parse_error(kProto2 + "0.").find("POP: no MARK"), std::string::npos);
    EXPECT_NE(parse_error(kProto2 + "e.").find("APPENDS: no MARK"), std::string::npos);
    EXPECT_NE(parse_error(kProto2 + "\xff.").find("opcode 0xff: unknown opcode"),
              std::string::npos);
    EXPECT_NE(parse_error(kProto2 + k(1)).find("without a STOP"), std::string::npos);
    EXPECT_NE(parse_error("\x80\x06.").find("unsupported pickle protocol 6"), std::string::npos);
    EXPECT_NE(parse_error(kProto2 + "}(" + k(1) + "u.").find("odd number"), std::string::npos);
    EXPECT_NE(parse_error(kProto2 + "]}b.").find("BUILD applied to list"), std::string::npos);
    EXPECT_NE(parse_error(kProto2 + k(1) + k(2) + "a.").find("cannot append to int"),
              std::string::npos);
    EXPECT_NE(parse_error(kProto2 + "\x82\x01.").find("extension registry"), std::string::npos);
    EXPECT_NE(parse_error("P1\n.").find("text persistent ids"), std::string::npos);
    EXPECT_NE(parse_error("\x80\x05\x97.").find("out-of-band"), std::string::npos);
    EXPECT_NE(parse_error("c" + std::string("no newline")).find("not terminated"),
              std::string::npos);
}

TEST(PickleMachine, HugeDeclaredLengthsAreRefused) {
    EXPECT_NE(parse_error(kProto2 + "X\xff\xff\xff\xff" + "abc.").find("needs 4294967295 bytes"),
              std::string::npos);
    EXPECT_NE(parse_error("\x80\x04\x8e" + le(~0ULL, 8) + ".").find("needs"), std::string::npos);
    EXPECT_NE(parse_error("\x80\x04\x95" + le(1ULL << 40, 8) + ".").find("frame of"),
              std::string::npos);
    EXPECT_NE(parse_error(kProto2 + "\x8b\xff\xff\xff\xff.").find("negative byte count"),
              std::string::npos);
}

TEST(PickleMachine, DeepNestingIsRefused) {
    EXPECT_NE(parse_error(std::string(5000, '(') + ".").find("MARKs nest deeper than 1000"),
              std::string::npos);
    std::string nested = kProto2 + ")";
    for (int i = 0; i < 2000; ++i)
        nested += "\x85";  // TUPLE1 around TUPLE1 around ...
    EXPECT_NE(parse_error(nested + ".").find("nest deeper than 1000"), std::string::npos);
    Limits tight;
    tight.max_nesting = 3;
    EXPECT_NE(parse_error(kProto2 + "]]]]aaa.", tight).find("nest deeper"), std::string::npos);
}

TEST(PickleMachine, SelfReferenceIsHarmless) {
    // A list appended to itself: a cycle. Parsing, printing and destruction must all be safe.
    auto parsed = parse(kProto2 + "]q\x00h\x00"s + "a.");
    const List* list = parsed.root().get<List>();
    ASSERT_NE(list, nullptr);
    EXPECT_EQ(list->items[0].as_object(), list);
    std::ostringstream out;
    print_value(out, parsed.root());
    EXPECT_NE(out.str().find("<cycle"), std::string::npos);
}

TEST(PickleMachine, PrinterCapsOutput) {
    // 2^20 leaves reachable through a DAG of 20 shared lists: output must stop at the cap.
    std::string dag = kProto2 + "]q\x00"s;
    for (int i = 1; i <= 20; ++i) {
        std::string prev(1, static_cast<char>(i - 1));
        dag += "](h" + prev + "h" + prev + "eq" + std::string(1, static_cast<char>(i));
    }
    dag += ".";
    auto parsed = parse(dag);
    PrintOptions options;
    options.max_lines = 1000;
    std::ostringstream out;
    print_value(out, parsed.root(), options);
    EXPECT_NE(out.str().find("output truncated after 1000 lines"), std::string::npos);
}

TEST(PickleMachine, EveryBundledPickleParses) {
    auto files = testing::find_files(testing::fixture_root(), ".pt");
    for (const auto& path : files) {
        SCOPED_TRACE(path);
        container::TorchFile file = container::TorchFile::open(path);
        EXPECT_NE(file.root().get<Dict>(), nullptr);
        std::ostringstream out;
        print_value(out, file.root());
        EXPECT_GT(out.str().size(), 10u);
    }
}

TEST(PickleMachine, EveryTruncationOfARealPickleIsAnError) {
    auto files =
        testing::find_files(testing::fixture_root() + "/z2_ws2_frozen_bf16", "model_states.pt");
    ASSERT_EQ(files.size(), 1u);
    container::TorchFile file = container::TorchFile::open(files[0]);
    std::vector<std::byte> bytes =
        file.zip()->read_record(file.file(), file.zip()->require("data.pkl"), 1 << 20);
    for (std::size_t cut = 0; cut < bytes.size(); ++cut) {
        EXPECT_THROW(parse_pickle(std::span(bytes).first(cut), "cut.pkl"), Error) << cut;
    }
}

TEST(PickleMachine, FlippedBytesNeverCrash) {
    auto files =
        testing::find_files(testing::fixture_root() + "/z3_ws2_fp32_torch2", "optim_states.pt");
    container::TorchFile file = container::TorchFile::open(files[0]);
    std::vector<std::byte> bytes =
        file.zip()->read_record(file.file(), file.zip()->require("data.pkl"), 1 << 20);
    for (std::size_t at = 0; at < bytes.size(); ++at) {
        for (unsigned mask : {0x01u, 0x80u, 0xFFu}) {
            auto copy = bytes;
            copy[at] ^= static_cast<std::byte>(mask);
            try {
                parse_pickle(copy, "flip.pkl");
            } catch (const Error&) {
            }
        }
    }
    SUCCEED();
}

}  // namespace
}  // namespace z2f::pickle
