#include "pickle/pickle_writer.hpp"

#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/errors.hpp"
#include "support/pickle_inspect.hpp"

namespace z2f::pickle {
namespace {

using namespace std::string_literals;
using test::load_pickle;
using test::repr;

std::string hex(std::span<const std::byte> bytes) {
    static const char* digits = "0123456789abcdef";
    std::string out;
    for (std::byte b : bytes) {
        auto v = std::to_integer<unsigned>(b);
        out.push_back(digits[v >> 4]);
        out.push_back(digits[v & 15]);
    }
    return out;
}

// The opcodes of one value between PROTO 2 and STOP, as hex.
template <typename Emit>
std::string body_hex(Emit emit) {
    PickleWriter writer;
    emit(writer);
    std::vector<std::byte> bytes = writer.finish();
    EXPECT_EQ(hex(std::span(bytes).first(2)), "8002");
    EXPECT_EQ(hex(std::span(bytes).last(1)), "2e");
    return hex(std::span(bytes).subspan(2, bytes.size() - 3));
}

std::string repr_of(const PickleValue& value) {
    return repr(load_pickle(dump(value)));
}

TEST(PickleWriter, IntegersMatchPythonsEncoding) {
    // Expected bytes are what CPython's pickle.dumps(v, 2) emits.
    const std::vector<std::pair<std::int64_t, std::string>> cases = {
        {0, "4b00"},
        {255, "4bff"},
        {256, "4d0001"},
        {65535, "4dffff"},
        {65536, "4a00000100"},
        {-1, "4affffffff"},
        {2147483647, "4affffff7f"},
        {2147483648, "8a050000008000"},
        {-2147483648LL, "4a00000080"},
        {-2147483649LL, "8a05ffffff7fff"},
        {std::numeric_limits<std::int64_t>::max(), "8a08ffffffffffffff7f"},
        {std::numeric_limits<std::int64_t>::min(), "8a080000000000000080"},
        {7000000000, "8a0500863ba101"},
        {-549755813888LL, "8a050000000080"},
        {1099511627776LL, "8a06000000000001"},
    };
    for (const auto& [value, expected] : cases) {
        // A copy to capture: clang 14 does not capture structured bindings in lambdas.
        const auto number = value;
        EXPECT_EQ(body_hex([&](PickleWriter& w) { w.integer(number); }), expected) << value;
        EXPECT_EQ(repr_of(PickleValue::integer(value)), std::to_string(value));
    }
}

TEST(PickleWriter, FloatsAreBigEndian) {
    EXPECT_EQ(body_hex([](PickleWriter& w) { w.floating(1.5); }), "473ff8000000000000");
    EXPECT_EQ(body_hex([](PickleWriter& w) { w.floating(-0.0); }), "478000000000000000");
    EXPECT_EQ(body_hex([](PickleWriter& w) { w.floating(0.1); }), "473fb999999999999a");
    EXPECT_EQ(
        body_hex([](PickleWriter& w) { w.floating(std::numeric_limits<double>::infinity()); }),
        "477ff0000000000000");
}

TEST(PickleWriter, ConstantsStringsAndGlobals) {
    EXPECT_EQ(body_hex([](PickleWriter& w) { w.none(); }), "4e");
    EXPECT_EQ(body_hex([](PickleWriter& w) { w.boolean(true); }), "88");
    EXPECT_EQ(body_hex([](PickleWriter& w) { w.boolean(false); }), "89");
    // 'é' is two UTF-8 bytes: the length counts bytes.
    EXPECT_EQ(body_hex([](PickleWriter& w) { w.unicode("h\xc3\xa9"); }),
              "5803000000"
              "68c3a9");
    // A GLOBAL is memoized at first use; the second use is a BINGET.
    EXPECT_EQ(body_hex([](PickleWriter& w) {
                  w.global("torch", "Size");
                  w.global("torch", "Size");
                  w.end_tuple(2);
              }),
              "63" + hex(as_byte_span("torch\nSize\n")) +
                  "7100"
                  "6800"
                  "86");
    EXPECT_THROW(
        {
            PickleWriter w;
            w.global("a\nb", "c");
        },
        Error);
}

TEST(PickleWriter, TupleOpcodesFollowTheItemCount) {
    for (std::size_t n = 0; n <= 5; ++n) {
        std::vector<PickleValue> items;
        for (std::size_t i = 0; i < n; ++i)
            items.emplace_back(i);
        std::map<std::uint8_t, std::size_t> ops;
        auto node = load_pickle(dump(PickleValue::tuple(items)), &ops);
        EXPECT_EQ(node->items.size(), n);
        EXPECT_EQ(ops['('], n > 3 ? 1u : 0u) << n;
    }
    EXPECT_EQ(repr_of(PickleValue::tuple({})), "()");
    EXPECT_EQ(repr_of(PickleValue::tuple({1})), "(1,)");
    EXPECT_EQ(repr_of(PickleValue::tuple({1, 2, 3, 4, 5})), "(1, 2, 3, 4, 5)");
}

TEST(PickleWriter, DictAndListItemsGoInBatchesOfAThousand) {
    auto counts = [](const PickleValue& value) {
        std::map<std::uint8_t, std::size_t> ops;
        load_pickle(dump(value), &ops);
        return ops;
    };
    auto one = counts(PickleValue::dict({{"a", 1}}));
    EXPECT_EQ(one['s'], 1u);
    EXPECT_EQ(one['u'], 0u);
    EXPECT_EQ(one['('], 0u);
    auto two = counts(PickleValue::dict({{"a", 1}, {"b", 2}}));
    EXPECT_EQ(two['u'], 1u);
    EXPECT_EQ(two['s'], 0u);

    PickleValue::Items many;
    std::vector<PickleValue> elements;
    for (int i = 0; i < 2001; ++i) {
        many.emplace_back("k" + std::to_string(i), i);
        elements.emplace_back(i);
    }
    auto dict_ops = counts(PickleValue::dict(many));
    EXPECT_EQ(dict_ops['u'], 2u);  // 1000 + 1000
    EXPECT_EQ(dict_ops['s'], 1u);  // the last batch of one
    auto list_ops = counts(PickleValue::list(elements));
    EXPECT_EQ(list_ops['e'], 2u);
    EXPECT_EQ(list_ops['a'], 1u);

    auto node = load_pickle(dump(PickleValue::dict(many)));
    ASSERT_EQ(node->items.size(), 2 * 2001u);
    EXPECT_EQ(node->items[2 * 1500]->text, "k1500");  // order preserved
    EXPECT_EQ(repr_of(PickleValue::list({})), "[]");
    EXPECT_EQ(repr_of(PickleValue::dict({})), "{}");
}

TEST(PickleWriter, LongMemoIndices) {
    // More than 256 memo entries switch to LONG_BINPUT / LONG_BINGET.
    auto name = [](int i) {
        std::string text("g");  // appended, not "g" + ...: GCC 12 -Wrestrict false positive
        text += std::to_string(i);
        return text;
    };
    PickleWriter writer;
    writer.mark();
    for (int i = 0; i < 300; ++i) {
        writer.global("m", name(i));
    }
    for (int i = 0; i < 300; ++i) {
        writer.global("m", name(i));
    }
    writer.end_tuple(600);
    std::map<std::uint8_t, std::size_t> ops;
    auto node = load_pickle(writer.finish(), &ops);
    EXPECT_EQ(ops['q'], 256u);
    EXPECT_EQ(ops['r'], 44u);
    EXPECT_EQ(ops['h'], 256u);
    EXPECT_EQ(ops['j'], 44u);
    ASSERT_EQ(node->items.size(), 600u);
    EXPECT_EQ(repr(node->items[599]), "m.g299");
}

TEST(PickleWriter, LikePythonMemoizesWhatCPythonMemoizes) {
    // CPython: t = (0.9, 0.999); s = 'x'
    // pickle.dumps({'lr': 0.5, 'betas': t, 'l': [t, s, s], 'e': (), 'n': None, 'big': 1 << 40}, 2)
    PickleWriter writer(MemoPolicy::kLikePython);
    writer.empty_dict();
    writer.mark();
    writer.unicode("lr");
    writer.floating(0.5);
    writer.unicode("betas");
    writer.begin_tuple(2);
    writer.floating(0.9);
    writer.floating(0.999);
    writer.end_tuple(2);
    const std::uint32_t betas = writer.memo_size() - 1;
    writer.unicode("l");
    writer.empty_list();
    writer.mark();
    writer.memo_get(betas);
    writer.unicode("x");
    writer.memo_get(writer.memo_size() - 1);
    writer.appends();
    writer.unicode("e");
    writer.empty_tuple();
    writer.unicode("n");
    writer.none();
    writer.unicode("big");
    writer.integer(std::int64_t{1} << 40);
    writer.setitems();
    EXPECT_EQ(hex(writer.finish()),
              "80027d71002858020000006c727101473fe0000000000000580500000062657461737102473feccc"
              "cccccccccd473feff7ced916872b86710358010000006c71045d7105286803580100000078710668"
              "066558010000006571072958010000006e71084e580300000062696771098a06000000000001752e");
}

TEST(PickleWriter, ContiguousStridesLikeTorch) {
    using V = std::vector<std::uint64_t>;
    EXPECT_EQ(contiguous_strides(V{}), V{});
    EXPECT_EQ(contiguous_strides(V{4, 5}), (V{5, 1}));
    EXPECT_EQ(contiguous_strides(V{5, 0}), (V{1, 1}));
    EXPECT_EQ(contiguous_strides(V{0, 5}), (V{5, 1}));
    EXPECT_EQ(contiguous_strides(V{2, 0, 3}), (V{3, 3, 1}));
}

TEST(PickleWriter, TensorGoldenBytes) {
    // {'w': tensor} exactly as written by hand from torch's conventions.
    PickleWriter writer;
    writer.empty_dict();
    writer.unicode("w");
    TensorToWrite ref;
    ref.storage = {DType::kF32, "0", 6, "cpu"};
    ref.shape = {2, 3};
    write_tensor_v2(writer, ref);
    writer.setitem();
    std::vector<std::byte> bytes = writer.finish();
    std::string expected =
        "8002"
        "7d"
        "580100000077"  // } 'w'
        "63" +
        hex(as_byte_span("torch._utils\n_rebuild_tensor_v2\n")) +
        "7100"
        "28"  // memo 0, MARK
        "28"
        "5807000000" +
        hex(as_byte_span("storage")) + "7101" + "63" + hex(as_byte_span("torch\nFloatStorage\n")) +
        "7102" +
        "580100000030"
        "5803000000637075"
        "7103"
        "4b06"
        "74"
        "51" +
        "4b00"
        "4b024b0386"
        "4b034b0186"
        "89" +
        "63" + hex(as_byte_span("collections\nOrderedDict\n")) + "7104" +
        "29"
        "52"
        "74"
        "52"
        "73"
        "2e";
    EXPECT_EQ(hex(bytes), expected);
    EXPECT_EQ(repr(load_pickle(bytes)),
              "{'w': torch._utils._rebuild_tensor_v2(persid(('storage', torch.FloatStorage, "
              "'0', 'cpu', 6)), 0, (2, 3), (3, 1), False, collections.OrderedDict())}");
}

TEST(PickleWriter, TensorViewsAndZeroDim) {
    TensorToWrite view;
    view.storage = {DType::kBF16, "3", 7000000000, "cuda:0"};
    view.storage_offset = 5;
    view.shape = {2};
    view.stride = {3};
    view.requires_grad = true;
    EXPECT_EQ(repr_of(PickleValue::tensor(view)),
              "torch._utils._rebuild_tensor_v2(persid(('storage', torch.BFloat16Storage, '3', "
              "'cuda:0', 7000000000)), 5, (2,), (3,), True, collections.OrderedDict())");
    TensorToWrite scalar;
    scalar.storage = {DType::kI64, "0", 1, "cpu"};
    EXPECT_EQ(repr_of(PickleValue::tensor(scalar)),
              "torch._utils._rebuild_tensor_v2(persid(('storage', torch.LongStorage, '0', 'cpu', "
              "1)), 0, (), (), False, collections.OrderedDict())");
    TensorToWrite bad = scalar;
    bad.stride = {1};
    EXPECT_THROW(dump(PickleValue::tensor(bad)), Error);
    TensorToWrite untyped = scalar;
    untyped.storage.dtype = DType::kU16;
    try {
        dump(PickleValue::tensor(untyped));
        FAIL() << "uint16 has no typed storage";
    } catch (const Error& error) {
        EXPECT_EQ(error.kind(), ErrorKind::kUnsupported);
    }
}

TEST(PickleWriter, DeepSpeedShapedValue) {
    auto shared_list = std::make_shared<const PickleValue>(PickleValue::list({1, 2}));
    TensorToWrite flat;
    flat.storage = {DType::kF32, "0", 10, "cpu"};
    flat.storage_offset = 3;
    flat.shape = {4};
    std::vector<std::uint64_t> dims = {53, 37};
    const std::byte raw[] = {std::byte{0x00}, std::byte{0xFF}, std::byte{'a'}};
    PickleValue value = PickleValue::dict({
        {"optimizer_state_dict",
         PickleValue::dict({
             {"zero_stage", PickleValue::reduce(PickleValue::global("deepspeed.runtime.zero.config",
                                                                    "ZeroStageEnum"),
                                                PickleValue::tuple({3}))},
             {"loss_scaler",
              PickleValue::object(
                  PickleValue::global("deepspeed.runtime.fp16.loss_scaler", "LossScaler"),
                  PickleValue::dict({{"cur_scale", 1.0}, {"dynamic", false}}))},
             {"partition_count", 2},
             {"fp32_flat_groups", PickleValue::list({PickleValue::tensor(flat)})},
         })},
        {"param_shapes", PickleValue::list({PickleValue::ordered_dict(
                             {{"fc1.weight", PickleValue::torch_size(dims)}})})},
        {"none", nullptr},
        {"bytes", PickleValue::bytes(raw)},
        {"empty_bytes", PickleValue::bytes({})},
        {"a", PickleValue::shared(shared_list)},
        {"b", PickleValue::shared(shared_list)},
        {"storage", PickleValue::storage({DType::kF16, "1", 2, "cpu"})},
    });
    std::vector<std::byte> bytes = dump(value);
    auto node = load_pickle(bytes);
    EXPECT_EQ(repr(node),
              "{'optimizer_state_dict': {'zero_stage': "
              "deepspeed.runtime.zero.config.ZeroStageEnum(3), 'loss_scaler': "
              "deepspeed.runtime.fp16.loss_scaler.LossScaler.__new__().__setstate__({'cur_scale':"
              " 1, 'dynamic': False}), "
              "'partition_count': 2, 'fp32_flat_groups': "
              "[torch._utils._rebuild_tensor_v2(persid(('storage', torch.FloatStorage, '0', "
              "'cpu', 10)), 3, (4,), (1,), False, collections.OrderedDict())]}, "
              "'param_shapes': [collections.OrderedDict(){'fc1.weight': torch.Size((53, 37))}], "
              "'none': None, 'bytes': _codecs.encode('\x00\xc3\xbf"
              "a', 'latin1'), "
              "'empty_bytes': __builtin__.bytes(), 'a': [1, 2], 'b': [1, 2], "
              "'storage': persid(('storage', torch.HalfStorage, '1', 'cpu', 2))}"s);
    // Shared values are one object: the second reference is a memo get.
    EXPECT_EQ(node->items[11], node->items[13]);
    EXPECT_THROW(dump(PickleValue::reduce(PickleValue::global("m", "f"), 3)), Error);
    // Cast to void: clang reads `PickleValue(std::numeric_limits<...>::max())` as a declaration.
    EXPECT_THROW(static_cast<void>(PickleValue(std::numeric_limits<std::uint64_t>::max())), Error);
}

}  // namespace
}  // namespace z2f::pickle
