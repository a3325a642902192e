// The fp32 masters of 16-bit runs without ZeRO (src/checkpoint/zero0_masters.hpp): the mapping
// rule alone, hand-built model files (FP16_UnfusedOptimizer's fp32_groups and FP16_Optimizer's
// fp32_groups_flat, with frozen, tied and same-shaped parameters, and malformed ones), and the
// real DeepSpeed 0.19.6 ZeRO-0 bf16 run.
#include "checkpoint/zero0_masters.hpp"

#include <cstring>
#include <map>
#include <set>

#include <gtest/gtest.h>

#include "checkpoint/file_grid.hpp"
#include "checkpoint/parallel_assemble.hpp"
#include "checkpoint/states_reader.hpp"
#include "common/errors.hpp"
#include "plan/zero0_plan.hpp"
#include "support/legacy_builder.hpp"
#include "support/test_files.hpp"

namespace z2f {
namespace {

using checkpoint::FlatPlace;
using checkpoint::MasterCandidate;
using pickle::PickleValue;

// --- the rule alone ------------------------------------------------------------------------

std::vector<MasterCandidate> candidates(
    const std::vector<std::pair<std::string, std::vector<std::uint64_t>>>& list) {
    std::vector<MasterCandidate> out;
    for (const auto& [name, shape] : list) {
        std::uint64_t numel = 1;
        for (std::uint64_t d : shape)
            numel *= d;
        out.push_back({name, shape, numel});
    }
    return out;
}

std::string error_of(const std::function<void()>& body) {
    try {
        body();
    } catch (const Error& error) {
        return error.what();
    }
    return "";
}

TEST(Zero0Masters, ShapesDecideAndValuesBreakTies) {
    // a (2,3), c (4,) frozen, b (4,), d (4,): three candidates of shape (4,) for two masters.
    auto params = candidates({{"a", {2, 3}}, {"c", {4}}, {"b", {4}}, {"d", {4}}});
    std::vector<std::vector<std::uint64_t>> shapes = {{4}, {2, 3}, {4}};  // masters: d, a, b
    // Master m rounds to candidate c exactly for these pairs.
    std::set<std::pair<std::size_t, std::size_t>> equal = {{0, 3}, {1, 0}, {2, 2}};
    std::vector<std::pair<std::size_t, std::size_t>> asked;
    auto rounds_to = [&](std::size_t m, std::uint64_t element, std::size_t c) {
        EXPECT_EQ(element, 0u);
        asked.emplace_back(m, c);
        return equal.count({m, c}) != 0;
    };
    std::vector<std::size_t> owner =
        checkpoint::map_master_tensors("f.pt", shapes, params, rounds_to);
    EXPECT_EQ(owner, (std::vector<std::size_t>{3, 0, 2}));
    // The one candidate of shape (2, 3) is taken without reading; ties read in module order.
    for (const auto& [m, c] : asked)
        EXPECT_NE(m, 1u);

    // Bitwise-equal 16-bit copies (every master rounds to every candidate): module order.
    owner = checkpoint::map_master_tensors(
        "f.pt", {{4}, {4}}, candidates({{"x", {4}}, {"y", {4}}}),
        [](std::size_t, std::uint64_t, std::size_t) { return true; });
    EXPECT_EQ(owner, (std::vector<std::size_t>{0, 1}));
}

TEST(Zero0Masters, MastersThatBelongToNoParameterAreRefused) {
    auto params = candidates({{"a", {2, 3}}, {"b", {4}}, {"c", {4}}});
    std::string message = error_of([&] {
        checkpoint::map_master_tensors(
            "f.pt", {{5}}, params, [](std::size_t, std::uint64_t, std::size_t) { return true; });
    });
    EXPECT_NE(message.find("fp32 master tensor 0 of shape (5,) has no parameter of that shape"),
              std::string::npos)
        << message;
    message = error_of([&] {
        checkpoint::map_master_tensors(
            "f.pt", {{2, 3}, {2, 3}}, params,
            [](std::size_t, std::uint64_t, std::size_t) { return true; });
    });
    EXPECT_NE(message.find("master tensor 1 of shape (2, 3) has no parameter of that shape left"),
              std::string::npos)
        << message;
    message = error_of([&] {
        checkpoint::map_master_tensors(
            "f.pt", {{4}}, params, [](std::size_t, std::uint64_t, std::size_t) { return false; });
    });
    EXPECT_NE(
        message.find("rounds to none of the 2 parameters of that shape in 'module' ('b', 'c')"),
        std::string::npos)
        << message;
}

TEST(Zero0Masters, FlatGroupsFollowModuleOrderWithFrozenParametersSkipped) {
    // Module: w1 (6) decay, f (2) frozen, b1 (3) no decay, w2 (6) decay, b2 (3) no decay.
    // Groups: [w1 w2] (12 elements), [b1 b2] (6 elements).
    auto params =
        candidates({{"w1", {2, 3}}, {"f", {2}}, {"b1", {3}}, {"w2", {3, 2}}, {"b2", {3}}});
    // Where each candidate's values start in which group.
    std::map<std::size_t, std::pair<std::size_t, std::uint64_t>> truth = {
        {0, {0, 0}}, {2, {1, 0}}, {3, {0, 6}}, {4, {1, 3}}};
    auto rounds_to = [&](std::size_t g, std::uint64_t element, std::size_t c) {
        auto it = truth.find(c);
        return it != truth.end() && it->second == std::make_pair(g, element);
    };
    auto places = checkpoint::map_flat_masters("f.pt", {12, 6}, params, rounds_to);
    ASSERT_EQ(places.size(), 5u);
    EXPECT_FALSE(places[1].has_value());
    for (const auto& [c, where] : truth) {
        ASSERT_TRUE(places[c].has_value()) << c;
        EXPECT_EQ(places[c]->group, where.first);
        EXPECT_EQ(places[c]->element, where.second);
    }
    // A group with elements no parameter accounts for, and a parameter two groups match.
    std::string message = error_of([&] {
        checkpoint::map_flat_masters("f.pt", {13, 6}, params, rounds_to);
    });
    EXPECT_NE(message.find("fp32_groups_flat'][0] holds 13 elements, but the module parameters it "
                           "holds, in module order, account for 12"),
              std::string::npos)
        << message;
    message = error_of([&] {
        checkpoint::map_flat_masters("f.pt", {6, 6}, candidates({{"w", {6}}}),
                                     [](std::size_t, std::uint64_t, std::size_t) { return true; });
    });
    EXPECT_NE(message.find("'w' matches the next elements of param groups 0 and 1"),
              std::string::npos)
        << message;
}

// --- hand-built model files --------------------------------------------------------------

std::vector<std::byte> f32(const std::vector<float>& values) {
    std::vector<std::byte> out(values.size() * 4);
    std::memcpy(out.data(), values.data(), out.size());
    return out;
}

// The bf16 copies of fp32 values that bf16 represents exactly: their high halves.
std::vector<std::byte> bf16(const std::vector<float>& values) {
    std::vector<std::byte> out(values.size() * 2);
    for (std::size_t i = 0; i < values.size(); ++i) {
        std::uint32_t bits;
        std::memcpy(&bits, &values[i], 4);
        const auto half = static_cast<std::uint16_t>(bits >> 16);
        std::memcpy(&out[2 * i], &half, 2);
    }
    return out;
}

struct Param {
    std::string name;
    std::vector<std::uint64_t> shape;
    std::vector<float> values;
};

// A ZeRO-0 bf16 model file: `module` holds every param (and `tied` as a second name of the
// first param's bytes), `optimizer` holds `masters` under `key` (fp32_groups: one list per group
// of the named params' masters; fp32_groups_flat: one flat tensor per group).
std::string model_file(const testing::TempDir& dir, const std::vector<Param>& module,
                       const std::string& key, const std::vector<std::vector<std::string>>& groups,
                       bool tied = false,
                       const std::map<std::string, std::vector<float>>& master_values = {}) {
    std::vector<testing::LegacyStorageBytes> storages;
    PickleValue::Items entries;
    for (const Param& param : module) {
        storages.push_back({"m_" + param.name, DType::kBF16, bf16(param.values), {}});
        entries.emplace_back(
            param.name, testing::legacy_tensor(DType::kBF16, "m_" + param.name, param.values.size(),
                                               0, param.shape));
    }
    if (tied) {
        entries.emplace_back("tied",
                             testing::legacy_tensor(DType::kBF16, "m_" + module[0].name,
                                                    module[0].values.size(), 0, module[0].shape));
    }
    // A parameter with its master's values (its own unless `master_values` says otherwise).
    auto find = [&](const std::string& name) -> Param {
        for (Param param : module) {
            if (param.name != name)
                continue;
            if (auto it = master_values.find(name); it != master_values.end())
                param.values = it->second;
            return param;
        }
        throw std::runtime_error("no param " + name);
    };
    std::vector<PickleValue> master_groups;
    for (std::size_t g = 0; g < groups.size(); ++g) {
        if (key == "fp32_groups") {
            std::vector<PickleValue> tensors;
            for (const std::string& name : groups[g]) {
                const Param param = find(name);
                storages.push_back({"f_" + name, DType::kF32, f32(param.values), {}});
                tensors.push_back(testing::legacy_tensor(DType::kF32, "f_" + name,
                                                         param.values.size(), 0, param.shape));
            }
            master_groups.push_back(PickleValue::list(std::move(tensors)));
        } else {
            std::vector<float> flat;
            for (const std::string& name : groups[g]) {
                const Param param = find(name);
                flat.insert(flat.end(), param.values.begin(), param.values.end());
            }
            const std::string storage = "flat_" + std::to_string(g);
            storages.push_back({storage, DType::kF32, f32(flat), {}});
            master_groups.push_back(
                testing::legacy_tensor(DType::kF32, storage, flat.size(), 0, {flat.size()}));
        }
    }
    PickleValue object = PickleValue::dict(
        {{"module", PickleValue::ordered_dict(entries)},
         {"buffer_names", PickleValue::list({})},
         {"optimizer",
          PickleValue::dict({{"cur_scale", 1.0}, {key, PickleValue::list(master_groups)}})},
         {"param_shapes", PickleValue::none()},
         {"mp_world_size", 1}});
    const std::string path = dir.file("mp_rank_00_model_states.pt");
    testing::write_file_bytes(
        path, testing::build_legacy_file(testing::legacy_parts(object, std::move(storages))));
    return path;
}

checkpoint::Zero0Masters read_masters(const std::string& path) {
    container::TorchFile file = container::TorchFile::open(path);
    checkpoint::ModelStatesInfo model =
        checkpoint::read_model_states(file, 0, checkpoint::ModelFileScope::kFull);
    return checkpoint::read_zero0_masters(file, model, 0);
}

// w (2,3), f (3,) frozen, b (3,), n (3,), in module order; f, b and n share a shape.
std::vector<Param> small_model() {
    return {{"w", {2, 3}, {1, 2, 3, 4, 5, 6}},
            {"f", {3}, {0.5f, 0.5f, 0.5f}},
            {"b", {3}, {-1, -2, -3}},
            {"n", {3}, {1.5f, 2.5f, 3.5f}}};
}

std::vector<std::string> names_of(const checkpoint::Zero0Masters& masters) {
    std::vector<std::string> names;
    for (const checkpoint::NamedTensor& master : masters.masters)
        names.push_back(master.name);
    return names;
}

TEST(Zero0Masters, UnfusedGroupsMapToTheirParametersInAnyGroupOrder) {
    testing::TempDir dir;
    // A weight-decay split whose groups do not follow module order: [n, w], [b].
    const std::string path =
        model_file(dir, small_model(), "fp32_groups", {{"n", "w"}, {"b"}}, true);
    checkpoint::Zero0Masters masters = read_masters(path);
    EXPECT_EQ(masters.key, "fp32_groups");
    EXPECT_EQ(masters.tensors, 3u);
    EXPECT_EQ(names_of(masters), (std::vector<std::string>{"w", "b", "n"}));
    // Each master points at its own fp32 storage: n's bytes are 1.5, 2.5, 3.5.
    const checkpoint::TensorRef& n = masters.masters[2].tensor;
    EXPECT_EQ(n.dtype, DType::kF32);
    EXPECT_EQ(n.shape, (std::vector<std::uint64_t>{3}));
    std::vector<std::byte> bytes = testing::read_file_bytes(path);
    float first;
    std::memcpy(&first, &bytes[n.offset], 4);
    EXPECT_EQ(first, 1.5f);

    // The plan's view: w, b, n trainable from masters, f frozen, 'tied' an alias of w.
    container::TorchFile file = container::TorchFile::open(path);
    checkpoint::ModelStatesInfo model =
        checkpoint::read_model_states(file, 0, checkpoint::ModelFileScope::kFull);
    std::vector<plan::Zero0Param> params = plan::zero0_parameters(model, masters);
    ASSERT_EQ(params.size(), 5u);
    EXPECT_EQ(params[0].role, TensorRole::kTrainable);
    EXPECT_EQ(params[0].source.dtype, DType::kF32);
    EXPECT_EQ(params[1].name, "f");
    EXPECT_EQ(params[1].role, TensorRole::kFrozen);
    EXPECT_EQ(params[1].source.dtype, DType::kBF16);
    EXPECT_EQ(params[4].name, "tied");
    EXPECT_EQ(params[4].role, TensorRole::kAlias);
    EXPECT_EQ(params[4].owner, "w");
}

TEST(Zero0Masters, FlatGroupsMapWithFrozenParametersBetween) {
    testing::TempDir dir;
    checkpoint::Zero0Masters masters =
        read_masters(model_file(dir, small_model(), "fp32_groups_flat", {{"w", "n"}, {"b"}}));
    EXPECT_EQ(masters.key, "fp32_groups_flat");
    EXPECT_EQ(masters.tensors, 2u);
    ASSERT_EQ(names_of(masters), (std::vector<std::string>{"w", "b", "n"}));
    // n is elements 6..8 of group 0, shaped like n.
    const checkpoint::TensorRef& w = masters.masters[0].tensor;
    const checkpoint::TensorRef& n = masters.masters[2].tensor;
    EXPECT_EQ(n.offset, w.offset + 6 * 4);
    EXPECT_EQ(n.length, 12u);
    EXPECT_EQ(w.shape, (std::vector<std::uint64_t>{2, 3}));
}

TEST(Zero0Masters, MalformedMastersAreRefusedNamingTheFile) {
    testing::TempDir dir;
    // b's master says 7, 8, 9 while its module copy says -1, -2, -3: it rounds to none of the
    // three parameters of shape (3,).
    std::string path =
        model_file(dir, small_model(), "fp32_groups", {{"w", "b"}}, false, {{"b", {7, 8, 9}}});
    std::string message = error_of([&] { read_masters(path); });
    EXPECT_NE(message.find(path), std::string::npos) << message;
    EXPECT_NE(message.find("fp32 master tensor 1 of shape (3,) rounds to none of the 3 parameters "
                           "of that shape in 'module' ('f', 'b', 'n')"),
              std::string::npos)
        << message;
    // A flat group with a master no parameter matches.
    path =
        model_file(dir, small_model(), "fp32_groups_flat", {{"w", "b"}}, false, {{"b", {7, 8, 9}}});
    message = error_of([&] { read_masters(path); });
    EXPECT_NE(message.find("fp32_groups_flat'][0] holds 9 elements"), std::string::npos) << message;

    // Both keys at once.
    PickleValue object = PickleValue::dict(
        {{"module", PickleValue::ordered_dict({})},
         {"optimizer", PickleValue::dict({{"fp32_groups", PickleValue::list({})},
                                          {"fp32_groups_flat", PickleValue::list({})}})}});
    path = dir.file("both.pt");
    testing::write_file_bytes(path, testing::build_legacy_file(testing::legacy_parts(object, {})));
    message = error_of([&] { read_masters(path); });
    EXPECT_NE(message.find("holds both fp32_groups"), std::string::npos) << message;

    // Masters but no module parameters: a pipeline stage.
    object = PickleValue::dict(
        {{"module", PickleValue::none()},
         {"optimizer",
          PickleValue::dict(
              {{"fp32_groups", PickleValue::list({PickleValue::list(
                                   {testing::legacy_tensor(DType::kF32, "k", 2, 0, {2})})})}})}});
    path = dir.file("stage.pt");
    testing::write_file_bytes(path, testing::build_legacy_file(testing::legacy_parts(
                                        object, {{"k", DType::kF32, f32({1, 2}), {}}})));
    message = error_of([&] { read_masters(path); });
    EXPECT_NE(message.find("holds no parameter to give them to"), std::string::npos) << message;

    // A master that is not floating point.
    object = PickleValue::dict(
        {{"module", PickleValue::ordered_dict({})},
         {"optimizer",
          PickleValue::dict(
              {{"fp32_groups", PickleValue::list({PickleValue::list(
                                   {testing::legacy_tensor(DType::kI64, "k", 1, 0, {1})})})}})}});
    path = dir.file("int.pt");
    testing::write_file_bytes(path,
                              testing::build_legacy_file(testing::legacy_parts(
                                  object, {{"k", DType::kI64, std::vector<std::byte>(8), {}}})));
    message = error_of([&] { read_masters(path); });
    EXPECT_NE(message.find("a floating-point fp32 master tensor"), std::string::npos) << message;

    // An fp32 run's plain optimizer state: no masters, nothing refused.
    object =
        PickleValue::dict({{"module", PickleValue::ordered_dict({})},
                           {"optimizer", PickleValue::dict({{"state", PickleValue::dict({})}})}});
    path = dir.file("fp32.pt");
    testing::write_file_bytes(path, testing::build_legacy_file(testing::legacy_parts(object, {})));
    EXPECT_TRUE(read_masters(path).key.empty());
}

TEST(Zero0Masters, RealBf16RunWithoutZeRO) {
    // DeepSpeed 0.19.6, ZeRO stage 0, bf16: FP16_UnfusedOptimizer's fp32_groups in the model
    // file. fc2.bias, norm.weight and norm.bias share the shape (29,): the values decide.
    const std::string dir = testing::fixture_path("../deepspeed-newest/z0_ws2_bf16");
    checkpoint::ParallelCheckpointMeta meta =
        checkpoint::read_parallel_checkpoint_meta(checkpoint::discover_file_grid(dir, ""));
    ASSERT_EQ(meta.ranks.size(), 1u);
    const checkpoint::Zero0Masters& masters = meta.ranks[0].model.extras.zero0_masters;
    EXPECT_EQ(masters.key, "fp32_groups");
    EXPECT_EQ(masters.tensors, 8u);
    EXPECT_EQ(names_of(masters),
              (std::vector<std::string>{"scale", "temp", "fc1.weight", "fc1.bias", "fc2.weight",
                                        "fc2.bias", "norm.weight", "norm.bias"}));
    // fp32_groups[0][i] is the i-th parameter in module order (one group, model.parameters()):
    // their storages follow one another in the file in that order.
    for (std::size_t i = 1; i < masters.masters.size(); ++i) {
        EXPECT_EQ(masters.masters[i].tensor.dtype, DType::kF32);
        EXPECT_GT(masters.masters[i].tensor.offset, masters.masters[i - 1].tensor.offset);
    }
}

}  // namespace
}  // namespace z2f
