#include "container/torch_file.hpp"

#include <functional>

#include <gtest/gtest.h>

#include "common/errors.hpp"
#include "support/expected_state.hpp"
#include "support/test_files.hpp"

namespace z2f {
namespace {

using pickle::Dict;
using pickle::List;
using pickle::Tensor;
using pickle::Value;

const Value& at(const Value& value, const std::string& key) {
    const Dict* dict = value.get<Dict>();
    if (dict == nullptr || dict->find(key) == nullptr) {
        throw std::runtime_error("missing key " + key);
    }
    return *dict->find(key);
}

void for_each_tensor(const Value& value, const std::function<void(const Tensor&)>& visit,
                     int depth = 0) {
    if (depth > 30)
        return;
    if (const Tensor* tensor = value.get<Tensor>()) {
        visit(*tensor);
    } else if (const Dict* dict = value.get<Dict>()) {
        for (const auto& [k, v] : dict->items)
            for_each_tensor(v, visit, depth + 1);
    } else if (const auto* list = value.get<List>()) {
        for (const auto& v : list->items)
            for_each_tensor(v, visit, depth + 1);
    } else if (const auto* tuple = value.get<pickle::Tuple>()) {
        for (const auto& v : tuple->items)
            for_each_tensor(v, visit, depth + 1);
    }
}

TEST(TorchFile, EveryTensorOfEveryFixtureLocates) {
    std::size_t count = 0;
    for (const auto& path : testing::find_files(testing::fixture_root(), ".pt")) {
        SCOPED_TRACE(path);
        container::TorchFile file = container::TorchFile::open(path);
        for_each_tensor(file.root(), [&](const Tensor& tensor) {
            container::TensorBytes bytes = file.locate(tensor, "tensor");
            EXPECT_LE(bytes.offset + bytes.length, file.zip()->file_size());
            ++count;
        });
    }
    EXPECT_GT(count, 400u);
}

// With one rank, the single fp32 partition of each group is the concatenation of the group's
// parameters in param_shapes order.
void check_world_size_one(const std::string& fixture, const std::string& groups_key,
                          const std::string& optim_name, const std::string& model_name) {
    auto expected =
        testing::read_expected_state_dict(testing::fixture_path(fixture + "/expected.pt"));
    container::TorchFile model =
        container::TorchFile::open(testing::fixture_path(fixture + "/global_step2/" + model_name));
    container::TorchFile optim =
        container::TorchFile::open(testing::fixture_path(fixture + "/global_step2/" + optim_name));
    const auto& groups =
        at(at(optim.root(), "optimizer_state_dict"), groups_key).get<List>()->items;
    const auto& shapes = at(model.root(), "param_shapes").get<List>()->items;
    ASSERT_EQ(groups.size(), shapes.size());
    for (std::size_t g = 0; g < groups.size(); ++g) {
        container::TensorBytes flat = optim.locate(*groups[g].get<Tensor>(), groups_key);
        EXPECT_EQ(flat.dtype, DType::kF32);
        std::uint64_t offset = flat.offset;
        for (const auto& [name, shape] : shapes[g].get<Dict>()->items) {
            const auto* truth = testing::find_tensor(expected, std::string(*name.string()));
            ASSERT_NE(truth, nullptr) << *name.string();
            auto actual = testing::read_range(optim.path(), offset, truth->bytes.size());
            EXPECT_EQ(actual, truth->bytes) << *name.string();
            offset += truth->bytes.size();
        }
        EXPECT_LE(offset, flat.offset + flat.length);
    }
}

TEST(TorchFile, Stage2WorldSizeOnePartitionsEqualExpected) {
    check_world_size_one("z2_ws1_fp32", "single_partition_of_fp32_groups",
                         "zero_pp_rank_0_mp_rank_00_optim_states.pt", "mp_rank_00_model_states.pt");
}

TEST(TorchFile, Stage3WorldSizeOnePartitionsEqualExpected) {
    check_world_size_one("z3_ws1_fp32", "fp32_flat_groups",
                         "zero_pp_rank_0_mp_rank_00_optim_states.pt",
                         "zero_pp_rank_0_mp_rank_00_model_states.pt");
}

TEST(TorchFile, BuffersAndFrozenFragmentsEqualExpected) {
    // Stage 2 frozen params are whole tensors in the model file, in the model's dtype (bf16).
    {
        auto expected = testing::read_expected_state_dict(
            testing::fixture_path("z2_ws2_frozen_bf16/expected.pt"));
        container::TorchFile model = container::TorchFile::open(
            testing::fixture_path("z2_ws2_frozen_bf16/global_step2/mp_rank_00_model_states.pt"));
        const auto* fragments = at(model.root(), "frozen_param_fragments").get<Dict>();
        ASSERT_NE(fragments, nullptr);
        ASSERT_EQ(fragments->items.size(), 2u);
        for (const auto& [name, value] : fragments->items) {
            container::TensorBytes bytes = model.locate(*value.get<Tensor>(), "fragment");
            EXPECT_EQ(bytes.dtype, DType::kBF16);
            const auto* truth = testing::find_tensor(expected, std::string(*name.string()));
            ASSERT_NE(truth, nullptr);
            EXPECT_EQ(bytes.shape, truth->shape);
            auto widened = testing::widen_to_f32(
                bytes.dtype, testing::read_range(model.path(), bytes.offset, bytes.length));
            EXPECT_EQ(widened, truth->bytes) << *name.string();
        }
    }
    // Buffers (float and int64) live in `module`, whole, in their own dtype.
    {
        auto expected = testing::read_expected_state_dict(
            testing::fixture_path("z3_ws2_tied_fp32/expected.pt"));
        container::TorchFile model = container::TorchFile::open(testing::fixture_path(
            "z3_ws2_tied_fp32/global_step2/zero_pp_rank_0_mp_rank_00_model_states.pt"));
        const auto* names = at(model.root(), "buffer_names").get<List>();
        ASSERT_NE(names, nullptr);
        ASSERT_EQ(names->items.size(), 2u);
        const auto& module = at(model.root(), "module");
        for (const auto& name : names->items) {
            const auto& tensor = *at(module, std::string(*name.string())).get<Tensor>();
            container::TensorBytes bytes = model.locate(tensor, "buffer");
            const auto* truth = testing::find_tensor(expected, std::string(*name.string()));
            ASSERT_NE(truth, nullptr);
            EXPECT_EQ(bytes.dtype, truth->dtype);
            EXPECT_EQ(testing::read_range(model.path(), bytes.offset, bytes.length), truth->bytes);
        }
        EXPECT_EQ(model.locate(*at(module, "position_ids").get<Tensor>(), "b").dtype, DType::kI64);
    }
}

TEST(TorchFile, Stage12PartitionsAreViewsSizedByTheTensorNotTheRecord) {
    // Rank 1 of a W=2 stage-2 run saves partition[:P - pad]: its storage can be longer.
    container::TorchFile optim = container::TorchFile::open(testing::fixture_path(
        "z2_ws2_fp32/global_step2/zero_pp_rank_1_mp_rank_00_optim_states.pt"));
    const auto& groups =
        at(at(optim.root(), "optimizer_state_dict"), "single_partition_of_fp32_groups")
            .get<List>()
            ->items;
    ASSERT_EQ(groups.size(), 1u);
    const Tensor& tensor = *groups[0].get<Tensor>();
    container::TensorBytes bytes = optim.locate(tensor, "partition");
    EXPECT_EQ(bytes.length, bytes.numel * 4);
    EXPECT_LE(tensor.shape[0], tensor.storage->numel);
}

TEST(TorchFile, LocateChecksTheViewAgainstItsRecord) {
    container::TorchFile optim = container::TorchFile::open(testing::fixture_path(
        "z2_ws2_fp32/global_step2/zero_pp_rank_0_mp_rank_00_optim_states.pt"));
    const auto& groups =
        at(at(optim.root(), "optimizer_state_dict"), "single_partition_of_fp32_groups")
            .get<List>()
            ->items;
    Tensor tensor;  // a hand-made view of the same storage
    tensor.storage = groups[0].get<Tensor>()->storage;
    tensor.dtype = DType::kF32;
    tensor.shape = {tensor.storage->numel};
    tensor.stride = {1};
    tensor.storage_offset = 1;  // one element past the end of the record
    try {
        optim.locate(tensor, "view");
        FAIL();
    } catch (const Error& error) {
        EXPECT_NE(std::string(error.what()).find("runs past its"), std::string::npos)
            << error.what();
    }
    tensor.storage_offset = 0;
    tensor.shape = {2, 3};
    tensor.stride = {1, 2};  // transposed: not contiguous
    EXPECT_THROW(optim.locate(tensor, "view"), Error);
    tensor.shape = {1ULL << 62, 8};
    tensor.stride = {8, 1};
    try {
        optim.locate(tensor, "huge");
        FAIL();
    } catch (const Error& error) {
        EXPECT_NE(std::string(error.what()).find("overflows 64 bits"), std::string::npos);
    }
}

}  // namespace
}  // namespace z2f
