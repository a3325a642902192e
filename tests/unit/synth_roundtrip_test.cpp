// Synthetic checkpoints through the real reader: generate into a temporary folder, discover,
// read the metadata, plan the consolidation, read every planned tensor serially and compare
// every element with the value function. Trainable parameters must be the fp32 masters bit for
// bit; frozen parameters and float buffers the model-dtype copy widened to fp32; position_ids
// 0, 1, 2, ...; the tied alias must point at its owner.
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "checkpoint/assemble.hpp"
#include "checkpoint/discovery.hpp"
#include "common/errors.hpp"
#include "io/posix_file.hpp"
#include "plan/consolidation.hpp"
#include "support/materialize.hpp"
#include "support/test_files.hpp"
#include "synth/checkpoint_writer.hpp"
#include "synth/value_function.hpp"

namespace z2f::synth {
namespace {

// A small model with odd sizes so that every padding rule matters: vocab 53, hidden 20,
// ffn 37, 2 layers, 4 heads of 5, 2 KV heads (about 9k parameters).
SynthOptions small_options(int stage, std::uint32_t world, DType dtype) {
    SynthOptions options;
    options.shape = LlamaShape{"test", 53, 20, 37, 2, 4, 2, 5};
    options.model.dtype = dtype;
    options.stage = stage;
    options.world = world;
    options.seed = 42 + world;
    return options;
}

SynthOptions with_extras(SynthOptions options) {
    options.model.buffers = true;
    options.model.tied = true;
    options.model.frozen = "layers\\.0\\.mlp|layers\\.1\\.self_attn\\.k_proj";
    return options;
}

std::string describe(const SynthOptions& o) {
    return "stage " + std::to_string(o.stage) + " W=" + std::to_string(o.world) + " " +
           std::string(dtype_display_name(o.model.dtype)) + (o.model.buffers ? " buffers" : "") +
           (o.model.tied ? " tied" : "") + (o.model.frozen.empty() ? "" : " frozen") +
           (o.torch2 ? " torch2" : "") + " groups=" + std::to_string(o.model.param_groups);
}

// zero_to_fp32's state-dict order (docs/deepspeed-format.md §6.5) for the synthetic model.
struct Expected {
    std::string name;
    TensorRole role;
    std::vector<std::uint64_t> shape;
    const ModelBuffer* buffer = nullptr;
};

std::vector<Expected> expected_order(const SynthContext& context) {
    const ModelSpec& model = context.model;
    std::vector<Expected> order;
    for (const ModelBuffer& buffer : model.buffers) {
        order.push_back({buffer.name, TensorRole::kBuffer, buffer.shape, &buffer});
    }
    for (const ModelParam& param : model.params) {
        if (!param.trainable)
            order.push_back({param.name, TensorRole::kFrozen, param.shape});
    }
    if (context.options.stage == 2) {
        for (const FlatGroup& group : context.stage2.groups) {
            for (std::size_t index : group.params) {
                order.push_back(
                    {model.params[index].name, TensorRole::kTrainable, model.params[index].shape});
            }
        }
    } else {
        for (const SubGroup& subgroup : context.stage3.subgroups) {
            for (std::size_t index : subgroup.params) {
                order.push_back(
                    {model.params[index].name, TensorRole::kTrainable, model.params[index].shape});
            }
        }
    }
    if (model.tied_alias) {
        const ModelParam& owner = model.params[model.tied_owner];
        order.push_back({*model.tied_alias, TensorRole::kAlias, owner.shape});
    }
    return order;
}

std::uint64_t numel_of(const std::vector<std::uint64_t>& shape) {
    std::uint64_t n = 1;
    for (std::uint64_t d : shape)
        n *= d;
    return n;
}

void expect_consolidates_exactly(const SynthOptions& options) {
    SCOPED_TRACE(describe(options));
    testing::TempDir dir;
    SynthContext context = SynthContext::make(options);
    write_checkpoint(context, dir.path());

    checkpoint::CheckpointFiles files = checkpoint::discover_checkpoint(dir.path(), "");
    EXPECT_EQ(files.tag, options.tag);
    EXPECT_EQ(files.optim_files.size(), options.world);
    EXPECT_EQ(files.model_files.size(), options.stage == 3 ? options.world : 1u);
    EXPECT_EQ(files.optim_prefix, options.model.dtype == DType::kBF16 ? "bf16_" : "");
    checkpoint::CheckpointMeta meta = checkpoint::read_checkpoint_meta(files);
    EXPECT_EQ(meta.zero_stage, options.stage);
    EXPECT_EQ(meta.world_size, options.world);
    plan::ConsolidationPlan result = plan::plan_consolidation(meta, plan::PlanOptions{});
    EXPECT_TRUE(result.warnings.empty()) << result.warnings.front();

    std::vector<Expected> expected = expected_order(context);
    const auto& tensors = result.plan.tensors;
    ASSERT_EQ(tensors.size(), expected.size());
    const DType model_dtype = options.model.dtype;
    for (std::size_t i = 0; i < tensors.size(); ++i) {
        const plan::PlannedTensor& tensor = tensors[i];
        const Expected& truth = expected[i];
        SCOPED_TRACE(truth.name);
        ASSERT_EQ(tensor.name, truth.name);
        EXPECT_EQ(tensor.role, truth.role);
        EXPECT_EQ(tensor.shape, truth.shape);
        if (truth.role == TensorRole::kAlias) {
            ASSERT_TRUE(tensor.is_alias());
            EXPECT_EQ(tensors[static_cast<std::size_t>(tensor.alias_of)].name,
                      context.model.params[context.model.tied_owner].name);
            continue;
        }
        std::vector<std::byte> bytes = testing::materialize(result.plan, i);
        const std::uint64_t n = numel_of(truth.shape);
        if (truth.buffer != nullptr && truth.buffer->is_int) {
            ASSERT_EQ(tensor.output_dtype, DType::kI64);
            ASSERT_EQ(bytes.size(), n * 8);
            for (std::uint64_t e = 0; e < n; ++e) {
                std::int64_t value;
                std::memcpy(&value, &bytes[8 * e], 8);
                ASSERT_EQ(value, static_cast<std::int64_t>(e)) << e;
            }
            continue;
        }
        ASSERT_EQ(tensor.output_dtype, DType::kF32);
        ASSERT_EQ(bytes.size(), n * 4);
        const std::uint64_t seed = options.seed;
        for (std::uint64_t e = 0; e < n; ++e) {
            float got;
            std::memcpy(&got, &bytes[4 * e], 4);
            float want = truth.role == TensorRole::kTrainable
                             ? expected_element(seed, truth.name, e)
                             : expected_model_element(seed, truth.name, e, model_dtype);
            ASSERT_EQ(std::bit_cast<std::uint32_t>(got), std::bit_cast<std::uint32_t>(want))
                << "element " << e;
        }
    }
}

TEST(SynthRoundTrip, Stage2AndStage3OverWorldSizesAndDtypes) {
    for (int stage : {2, 3}) {
        for (std::uint32_t world : {1u, 2u, 3u, 5u}) {
            for (DType dtype : {DType::kBF16, DType::kF32}) {
                expect_consolidates_exactly(small_options(stage, world, dtype));
                expect_consolidates_exactly(with_extras(small_options(stage, world, dtype)));
            }
        }
    }
}

TEST(SynthRoundTrip, Fp16OneGroupAndFrozenCount) {
    for (int stage : {2, 3}) {
        SynthOptions options = with_extras(small_options(stage, 3, DType::kF16));
        options.model.param_groups = 1;
        expect_consolidates_exactly(options);
        options.model.frozen = "4";  // the first four parameters in module order
        options.model.tied = false;
        expect_consolidates_exactly(options);
    }
}

TEST(SynthRoundTrip, WorldLargerThanSomeParameters) {
    // W=32 over 20-element norms: stage 3 ranks 20..31 hold only padding of them, stage 2's
    // last ranks save empty partitions of the no-decay group.
    for (int stage : {2, 3}) {
        expect_consolidates_exactly(with_extras(small_options(stage, 32, DType::kBF16)));
    }
}

TEST(SynthRoundTrip, FrozenTiedOwner) {
    // lm_head aliases a frozen embedding: the alias follows its owner into the frozen tensors.
    for (int stage : {2, 3}) {
        SynthOptions options = with_extras(small_options(stage, 2, DType::kBF16));
        options.model.frozen = "embed_tokens";
        expect_consolidates_exactly(options);
    }
}

TEST(SynthRoundTrip, Stage3SubGroupsTorch2AndZeroStageByValue) {
    SynthOptions options = with_extras(small_options(3, 5, DType::kBF16));
    options.sub_group_size = 150;  // many sub-groups per param group
    SynthContext context = SynthContext::make(options);
    EXPECT_GT(context.stage3.subgroups.size(), 4u);
    expect_consolidates_exactly(options);
    options.torch2 = true;
    options.zero_stage_encoding = ZeroStageEncoding::kByValue;
    expect_consolidates_exactly(options);
    SynthOptions stage2 = small_options(2, 2, DType::kF32);
    stage2.torch2 = true;
    stage2.zero_stage_encoding = ZeroStageEncoding::kByValue;
    expect_consolidates_exactly(stage2);
}

TEST(SynthRoundTrip, WithoutMomentsOrWithSparseMoments) {
    for (int stage : {2, 3}) {
        SynthOptions options = with_extras(small_options(stage, 3, DType::kBF16));
        options.moments = false;
        expect_consolidates_exactly(options);
        options.moments = true;
        options.sparse_moments = true;
        expect_consolidates_exactly(options);
    }
}

TEST(SynthRoundTrip, RefusesAFolderOfAnotherCheckpoint) {
    testing::TempDir dir;
    write_checkpoint(SynthContext::make(small_options(3, 3, DType::kBF16)), dir.path());
    // Rewriting the same checkpoint is fine; a smaller world would leave rank 2's files.
    EXPECT_NO_THROW(
        write_checkpoint(SynthContext::make(small_options(3, 3, DType::kBF16)), dir.path()));
    EXPECT_THROW(
        write_checkpoint(SynthContext::make(small_options(3, 2, DType::kBF16)), dir.path()), Error);
}

}  // namespace
}  // namespace z2f::synth
