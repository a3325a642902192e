// The synthetic checkpoint generator's pure parts: the value function, the Llama shapes and the
// partition layouts of docs/deepspeed-format.md §5.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <vector>

#include <gtest/gtest.h>

#include "common/errors.hpp"
#include "synth/model_spec.hpp"
#include "synth/partition_layout.hpp"
#include "synth/record_content.hpp"
#include "synth/value_function.hpp"

namespace z2f::synth {
namespace {

// Round-to-nearest-even of a finite fp32 value to `mantissa_bits` bits (normal results only),
// through exact double arithmetic: an independent reference for the bit tricks.
float round_reference(float value, int mantissa_bits) {
    int exponent = 0;
    std::frexp(value, &exponent);  // value = m * 2^exponent, m in [0.5, 1)
    double ulp = std::ldexp(1.0, exponent - 1 - mantissa_bits);
    return static_cast<float>(std::nearbyint(static_cast<double>(value) / ulp) * ulp);
}

TEST(SynthValues, PureFunctionOfSeedNameAndIndex) {
    EXPECT_EQ(std::bit_cast<std::uint32_t>(expected_element(7, "a.weight", 12)),
              std::bit_cast<std::uint32_t>(expected_element(7, "a.weight", 12)));
    EXPECT_NE(expected_element(7, "a.weight", 12), expected_element(8, "a.weight", 12));
    EXPECT_NE(expected_element(7, "a.weight", 12), expected_element(7, "b.weight", 12));
    EXPECT_NE(expected_element(7, "a.weight", 12), expected_element(7, "a.weight", 13));
    std::set<std::uint32_t> distinct;
    for (std::uint64_t i = 0; i < 100000; ++i) {
        float value = expected_element(1, "x", i);
        ASSERT_TRUE(std::isnormal(value)) << i;
        ASSERT_GE(std::fabs(value), 0x1p-7f) << i;
        ASSERT_LT(std::fabs(value), 2.0f) << i;
        distinct.insert(std::bit_cast<std::uint32_t>(value));
    }
    EXPECT_GT(distinct.size(), 99000u);
}

TEST(SynthValues, NarrowingRoundsToNearestEven) {
    int inexact_bf16 = 0;
    for (std::uint64_t i = 0; i < 200000; ++i) {
        std::uint32_t bits = element_bits(0x1234, i);
        float value = f32_from_bits(bits);
        float bf16 = f32_from_bf16_bits(bf16_bits_from_f32(bits));
        float f16 = f32_from_f16_bits(f16_bits_from_f32(bits));
        ASSERT_EQ(bf16, round_reference(value, 7)) << value;
        ASSERT_EQ(f16, round_reference(value, 10)) << value;
        inexact_bf16 += bf16 != value ? 1 : 0;
    }
    // Ties: exactly half-way patterns go to the even neighbour.
    EXPECT_EQ(bf16_bits_from_f32(0x3F808000u), 0x3F80u);
    EXPECT_EQ(bf16_bits_from_f32(0x3F818000u), 0x3F82u);
    EXPECT_EQ(f16_bits_from_f32(0x3F801000u), 0x3C00u);
    EXPECT_EQ(f16_bits_from_f32(0x3F803000u), 0x3C02u);
    // The masters are almost never representable in 16 bits: reading the copy is caught.
    EXPECT_GT(inexact_bf16, 199000);
    EXPECT_EQ(expected_model_element(3, "w", 5, DType::kF32), expected_element(3, "w", 5));
    EXPECT_EQ(expected_model_element(3, "w", 5, DType::kBF16),
              f32_from_bf16_bits(bf16_bits_from_f32(element_bits(value_key(3, "w"), 5))));
}

TEST(SynthValues, FillMatchesTheElementFunctionAtAnyOffset) {
    const std::uint64_t key = value_key(9, "model.norm.weight");
    for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
        std::size_t item = dtype_size(dtype);
        std::vector<std::byte> out(3001 * item);
        fill_values(key, 123456789, dtype, out);
        for (std::size_t k = 0; k < 3001; ++k) {
            std::uint32_t bits = element_bits(key, 123456789 + k);
            if (item == 4) {
                std::uint32_t got;
                std::memcpy(&got, &out[4 * k], 4);
                ASSERT_EQ(got, bits);
            } else {
                std::uint16_t got;
                std::memcpy(&got, &out[2 * k], 2);
                ASSERT_EQ(got, dtype == DType::kBF16 ? bf16_bits_from_f32(bits)
                                                     : f16_bits_from_f32(bits));
            }
        }
    }
}

TEST(SynthRecordContent, SegmentsProduceAnyRange) {
    RecordContent content(DType::kF32);
    content.add_values(11, 5, 10);
    content.add_zeros(3);
    content.add_zeros(2);  // merges with the previous run
    content.add_values(22, 0, 7);
    content.add_constant_f32(2.0f, 2);
    ASSERT_EQ(content.numel(), 24u);
    std::vector<std::byte> whole(content.size_bytes());
    content.produce(0, whole);
    for (std::uint64_t start = 0; start < 24; ++start) {
        for (std::uint64_t end = start; end <= 24; ++end) {
            std::vector<std::byte> part((end - start) * 4);
            content.produce(start * 4, part);
            ASSERT_TRUE(std::equal(part.begin(), part.end(),
                                   whole.begin() + static_cast<std::ptrdiff_t>(start * 4)));
        }
    }
    auto at = [&](std::size_t k) {
        std::uint32_t bits;
        std::memcpy(&bits, &whole[4 * k], 4);
        return bits;
    };
    EXPECT_EQ(at(0), element_bits(11, 5));
    EXPECT_EQ(at(9), element_bits(11, 14));
    EXPECT_EQ(at(10), 0u);
    EXPECT_EQ(at(14), 0u);
    EXPECT_EQ(at(15), element_bits(22, 0));
    EXPECT_EQ(at(22), std::bit_cast<std::uint32_t>(2.0f));
    EXPECT_THROW(content.produce(2, std::span(whole).first(4)), Error);

    RecordContent ids(DType::kI64);
    ids.add_arange(0, 5);
    std::vector<std::byte> out(40);
    ids.produce(0, out);
    std::int64_t fourth;
    std::memcpy(&fourth, &out[32], 8);
    EXPECT_EQ(fourth, 4);
}

TEST(SynthModel, PresetsHaveTheLlamaParameterCounts) {
    // Published parameter counts of Llama 3.2 1B (tied), Llama 3.1 8B / 70B / 405B.
    EXPECT_EQ(parameter_count(*llama_preset("1b"), true), 1235814400u);
    EXPECT_EQ(parameter_count(*llama_preset("8b"), false), 8030261248u);
    EXPECT_EQ(parameter_count(*llama_preset("70b"), false), 70553706496u);
    EXPECT_EQ(parameter_count(*llama_preset("405b"), false), 405853388800u);
    EXPECT_LT(parameter_count(*llama_preset("tiny"), false), 2000000u);
    for (const std::string& name : llama_preset_names()) {
        ModelSpec spec = build_model(*llama_preset(name), ModelOptions{});
        std::uint64_t total = 0;
        for (const ModelParam& param : spec.params)
            total += param.numel();
        EXPECT_EQ(total, parameter_count(*llama_preset(name), false)) << name;
    }
    EXPECT_FALSE(llama_preset("13b"));
}

TEST(SynthModel, ScalingOptions) {
    LlamaShape base = *llama_preset("8b");
    ShapeOverrides narrow;
    narrow.hidden = 1024;
    LlamaShape s = scale_shape(base, narrow, false);
    EXPECT_EQ(s.hidden, 1024u);
    EXPECT_EQ(s.ffn, 3584u);  // 14336 / 4096 * 1024
    EXPECT_EQ(s.head_dim, 128u);
    EXPECT_EQ(s.heads, 8u);
    EXPECT_EQ(s.kv_heads, 8u);

    ShapeOverrides target;
    target.target_params = 2e9;
    s = scale_shape(base, target, false);
    double count = static_cast<double>(parameter_count(s, false));
    EXPECT_NEAR(count, 2e9, 0.11e9);  // one layer is 0.22e9
    target.target_params = 1e3;       // below the embeddings: one layer at least
    EXPECT_EQ(scale_shape(base, target, false).layers, 1u);

    ShapeOverrides bad;
    bad.vocab = 0;
    EXPECT_THROW(scale_shape(base, bad, false), Error);
}

ModelSpec small_model(const std::string& frozen = "", bool tied = false, int groups = 2,
                      bool buffers = false) {
    LlamaShape shape{"test", 53, 20, 37, 2, 4, 2, 5};
    ModelOptions options;
    options.frozen = frozen;
    options.tied = tied;
    options.param_groups = groups;
    options.buffers = buffers;
    return build_model(shape, options);
}

TEST(SynthModel, ModuleOrderTiesFrozenAndGroups) {
    ModelSpec spec = small_model("mlp", true, 2, true);
    ASSERT_EQ(spec.module.front().name, "model.pos_scale");
    EXPECT_EQ(spec.module[1].name, "model.position_ids");
    EXPECT_EQ(spec.module[2].name, "model.embed_tokens.weight");
    EXPECT_EQ(spec.module.back().name, "lm_head.weight");
    EXPECT_EQ(spec.module.back().kind, ModuleEntry::Kind::kAlias);
    EXPECT_EQ(spec.params.back().name, "model.norm.weight");  // lm_head is not a parameter
    for (const ModelParam& param : spec.params) {
        bool mlp = param.name.find("mlp") != std::string::npos;
        EXPECT_EQ(param.trainable, !mlp) << param.name;
        EXPECT_EQ(param.group, mlp ? -1 : (param.is_norm ? 1 : 0)) << param.name;
    }
    EXPECT_EQ(spec.group_count, 2);

    // Freezing every weight matrix leaves the no-decay group alone, renumbered 0.
    ModelSpec norms_only = small_model("proj|embed|lm_head", false, 2);
    EXPECT_EQ(norms_only.group_count, 1);
    EXPECT_EQ(norms_only.group_is_decay, std::vector<bool>{false});
    // N: the first N parameters in module order.
    ModelSpec first3 = small_model("3");
    EXPECT_FALSE(first3.params[2].trainable);
    EXPECT_TRUE(first3.params[3].trainable);
    EXPECT_THROW(small_model("."), Error);   // all frozen
    EXPECT_THROW(small_model("(["), Error);  // not a regex
}

TEST(SynthLayout, Stage2WorkedExampleOfTheFormatNotes) {
    // docs/deepspeed-format.md §6.2: W=4, A (15 elements) + B (2): aligned 24, P=6, saved 6,6,5,0.
    ModelSpec spec;
    spec.params = {{"A", {3, 5}, true, false, 0}, {"B", {2}, true, false, 0}};
    spec.group_count = 1;
    Stage2Layout layout = stage2_layout(spec, 4);
    ASSERT_EQ(layout.groups.size(), 1u);
    const FlatGroup& group = layout.groups[0];
    EXPECT_EQ(group.numel, 17u);
    EXPECT_EQ(group.aligned, 24u);
    EXPECT_EQ(group.partition, 6u);
    EXPECT_EQ(group.saved_length(0), 6u);
    EXPECT_EQ(group.saved_length(1), 6u);
    EXPECT_EQ(group.saved_length(2), 5u);
    EXPECT_EQ(group.saved_length(3), 0u);
    EXPECT_EQ(group.padding(3), 6u);
    // Rank 2 holds A[12:15] then B[0:2].
    std::vector<Fragment> rank2 = stage2_fragments(spec, group, 2);
    ASSERT_EQ(rank2.size(), 2u);
    EXPECT_EQ(rank2[0].param, 0u);
    EXPECT_EQ(rank2[0].first, 12u);
    EXPECT_EQ(rank2[0].count, 3u);
    EXPECT_EQ(rank2[0].offset, 0u);
    EXPECT_EQ(rank2[1].param, 1u);
    EXPECT_EQ(rank2[1].first, 0u);
    EXPECT_EQ(rank2[1].count, 2u);
    EXPECT_EQ(rank2[1].offset, 3u);
    EXPECT_TRUE(stage2_fragments(spec, group, 3).empty());
}

TEST(SynthLayout, Stage2FragmentsCoverEveryElementOnce) {
    ModelSpec spec = small_model();
    for (std::uint32_t world = 1; world <= 9; ++world) {
        Stage2Layout layout = stage2_layout(spec, world);
        for (const FlatGroup& group : layout.groups) {
            EXPECT_EQ(group.aligned % (2 * world), 0u);
            EXPECT_LT(group.aligned - group.numel, 2u * world);
            std::uint64_t saved = 0;
            std::vector<std::uint64_t> seen(spec.params.size(), 0);
            for (std::uint32_t r = 0; r < world; ++r) {
                saved += group.saved_length(r);
                std::uint64_t filled = 0;
                for (const Fragment& f : stage2_fragments(spec, group, r)) {
                    EXPECT_EQ(f.offset, filled);
                    EXPECT_EQ(f.first, seen[f.param]);  // in order, no gap, no overlap
                    seen[f.param] += f.count;
                    filled += f.count;
                }
                EXPECT_EQ(filled, group.saved_length(r));
            }
            EXPECT_EQ(saved, group.numel);
            for (std::size_t index : group.params) {
                EXPECT_EQ(seen[index], spec.params[index].numel());
            }
        }
    }
}

TEST(SynthLayout, Stage3SlotsAndSubGroups) {
    // §6.3: W=4, A (15) -> P=4 with 1 pad; B (2) -> P=1; rank 3 holds A[12:15].
    EXPECT_EQ(stage3_slot(15, 4), 4u);
    EXPECT_EQ(stage3_slot(2, 4), 1u);
    Fragment last = stage3_fragment(15, 4, 3);
    EXPECT_EQ(last.first, 12u);
    EXPECT_EQ(last.count, 3u);
    EXPECT_EQ(stage3_fragment(2, 4, 3).count, 0u);  // a rank of pure padding
    EXPECT_EQ(stage3_fragment(2, 4, 1).first, 1u);

    ModelSpec spec = small_model();
    // Default size: one sub-group per param group.
    Stage3Layout whole = stage3_layout(spec, 3, 1000000000);
    ASSERT_EQ(whole.subgroups.size(), 2u);
    EXPECT_EQ(whole.subgroups[0].param_group, 0);
    EXPECT_EQ(whole.subgroups[1].param_group, 1);
    // A small size closes a sub-group as soon as the running sum reaches it.
    const std::uint64_t size = 300;
    Stage3Layout split = stage3_layout(spec, 3, size);
    EXPECT_GT(split.subgroups.size(), 3u);
    std::size_t params = 0;
    for (const SubGroup& subgroup : split.subgroups) {
        std::uint64_t total = 0;
        for (std::size_t k = 0; k < subgroup.params.size(); ++k) {
            EXPECT_EQ(subgroup.offsets[k], total);
            EXPECT_EQ(subgroup.slots[k], stage3_slot(spec.params[subgroup.params[k]].numel(), 3));
            total += subgroup.slots[k];
            // Only the last member may reach the size.
            if (k + 1 < subgroup.params.size()) {
                EXPECT_LT(total, size);
            }
        }
        EXPECT_EQ(subgroup.total, total);
        params += subgroup.params.size();
    }
    EXPECT_EQ(params, spec.params.size());
    // The no-decay group (5 norm weights, 7 elements per rank each) fits in 300: kept whole.
    EXPECT_EQ(split.subgroups.back().params.size(), 5u);
}

}  // namespace
}  // namespace z2f::synth
