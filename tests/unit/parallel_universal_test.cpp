// The universal checkpoint of tensor- and pipeline-parallel checkpoints (plan_parallel_universal,
// docs/universal-checkpoint.md §10), planned without MPI from the real fixtures' metadata,
// realised in memory and compared with DeepSpeed's own ds_to_universal.py output (ref/universal
// of each fixture): every file byte for byte, except the vocabulary's tensor files, whose storage
// holds only the real rows here (compared by content); the dict keys of every merge rule; steps
// and tied weights; the RunPlan at several rank counts; and every refusal with its reason.
#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include <gtest/gtest.h>

#include "checkpoint/file_grid.hpp"
#include "checkpoint/parallel_assemble.hpp"
#include "output/universal_layout.hpp"
#include "plan/universal_plan.hpp"
#include "run/run_plan.hpp"
#include "run/tensor_source.hpp"
#include "support/materialize.hpp"
#include "support/synthetic_meta.hpp"
#include "support/test_files.hpp"
#include "support/universal_reference.hpp"
#include "zero2fp32/error.hpp"

namespace z2f::plan {
namespace {

namespace fs = std::filesystem;

const std::string kVocab = "language_model.embedding.word_embeddings.weight";

checkpoint::ParallelCheckpointMeta read_meta(const std::string& fixture) {
    return checkpoint::read_parallel_checkpoint_meta(
        checkpoint::discover_file_grid(testing::parallel_fixture_dir(fixture), ""));
}

struct Built {
    UniversalPlan plan;
    std::vector<output::UniversalOutputFile> files;
};

Built build(const checkpoint::ParallelCheckpointMeta& meta,
            const ParallelPlanOptions& options = {}) {
    Built built;
    built.plan = plan_parallel_universal(meta, options);
    built.files = output::plan_universal_files(universal_optimizer_source(meta), built.plan);
    return built;
}

// The error plan_parallel_universal throws: its kind and message.
std::pair<std::optional<ErrorKind>, std::string> refusal(
    const checkpoint::ParallelCheckpointMeta& meta, const ParallelPlanOptions& options = {}) {
    try {
        plan_parallel_universal(meta, options);
    } catch (const Error& error) {
        return {error.kind(), error.what()};
    }
    return {std::nullopt, ""};
}

const UniversalParam* find_param(const UniversalPlan& plan, const std::string& name) {
    for (const UniversalParam& param : plan.params) {
        if (param.name == name)
            return &param;
    }
    return nullptr;
}

std::vector<std::string> tree(const std::string& root) {
    std::vector<std::string> names;
    for (const auto& entry : fs::recursive_directory_iterator(root)) {
        if (entry.is_regular_file())
            names.push_back(fs::relative(entry.path(), root).string());
    }
    std::sort(names.begin(), names.end());
    return names;
}

// tp2_dp2_z1_fp32's Megatron rules as a --tp-rules file (the one the e2e test passes).
std::string tp2_rules_path() {
    return testing::parallel_fixture_dir("tp2_dp2_z1_fp32") + ".tp-rules.json";
}

TEST(ParallelUniversal, EveryFileOfDeepSpeedsOutput) {
    for (const std::string& fixture : testing::parallel_universal_fixtures()) {
        SCOPED_TRACE(fixture);
        const checkpoint::ParallelCheckpointMeta meta = read_meta(fixture);
        const Built built = build(meta);
        const std::string root = testing::parallel_universal_reference(fixture);
        std::vector<std::string> produced;
        std::size_t identical = 0;
        testing::TempDir temp;
        for (const output::UniversalOutputFile& file : built.files) {
            SCOPED_TRACE(file.path);
            produced.push_back(file.path);
            std::vector<std::byte> bytes;
            switch (file.kind) {
                case output::UniversalOutputFile::Kind::kCopy:
                    bytes = testing::read_file_bytes(meta.inputs.at(file.source));
                    break;
                case output::UniversalOutputFile::Kind::kTensor:
                    bytes = testing::realize_layout(file.layout, built.plan.plan);
                    break;
                case output::UniversalOutputFile::Kind::kBytes:
                    bytes = file.bytes;
                    break;
            }
            EXPECT_EQ(bytes.size(), file.size);
            const std::string reference = root + "/" + file.path;
            ASSERT_TRUE(fs::exists(reference));
            if (file.path.find("/" + kVocab + "/") != std::string::npos &&
                file.kind == output::UniversalOutputFile::Kind::kTensor) {
                // ds_to_universal.py slices the merged tensor without copying it, so its storage
                // keeps the padded rows past the view; ours holds the real rows only. Everything
                // the loader sees is equal.
                const std::string ours =
                    temp.path() + "/" + fs::path(file.path).filename().string();
                testing::write_file_bytes(ours, bytes);
                const testing::UniversalTensorFile a = testing::read_universal_tensor_file(ours);
                const testing::UniversalTensorFile b =
                    testing::read_universal_tensor_file(reference);
                EXPECT_EQ(a.entries, b.entries);
                EXPECT_EQ(a.shape, b.shape);
                EXPECT_EQ(a.dtype, b.dtype);
                EXPECT_EQ(a.requires_grad, b.requires_grad);
                EXPECT_TRUE(a.bytes == b.bytes);
                EXPECT_EQ(a.storage_numel, 50u * 16);
                EXPECT_EQ(b.storage_numel, 52u * 16);
                continue;
            }
            EXPECT_TRUE(bytes == testing::read_file_bytes(reference))
                << "differs from ds_to_universal.py's";
            identical += bytes == testing::read_file_bytes(reference) ? 1u : 0u;
        }
        std::sort(produced.begin(), produced.end());
        EXPECT_EQ(produced, tree(root));
        EXPECT_EQ(built.files.back().path, "latest_universal");
        // Every file but the vocabulary's three tensor files.
        const bool tp = fixture.starts_with("tp");
        EXPECT_EQ(identical, produced.size() - (tp ? 3u : 0u));
    }
}

TEST(ParallelUniversal, DictKeysFollowTheMergeRules) {
    const Built built = build(read_meta("tp2_dp2_z1_fp32"));
    using Entries = std::vector<ParamDictEntry>;
    const std::string layer = "language_model.encoder.layers.";
    const std::map<std::string, Entries> expected = {
        {kVocab, {{"cat_dim", 0, false}, {"vocab_tensor", 1, true}}},
        {"language_model.embedding.position_embeddings.weight", {}},
        {layer + "0.input_layernorm.weight", {}},
        {layer + "0.mlp.dense_h_to_4h.weight", {{"cat_dim", 0, false}}},
        {layer + "0.mlp.dense_h_to_4h.bias", {{"cat_dim", 0, false}}},
        {layer + "0.mlp.dense_4h_to_h.weight", {{"cat_dim", 1, false}}},
        {layer + "0.mlp.dense_4h_to_h.bias", {}},
        {layer + "1.mlp.dense_h_to_4h.weight",
         {{"cat_dim", 0, false}, {"param_n_sub_params", 2, false}}},
        {layer + "1.mlp.dense_h_to_4h.bias",
         {{"cat_dim", 0, false}, {"param_n_sub_params", 2, false}}},
        {"language_model.encoder.final_layernorm.bias", {}},
    };
    for (const auto& [name, entries] : expected) {
        const UniversalParam* param = find_param(built.plan, name);
        ASSERT_NE(param, nullptr) << name;
        EXPECT_EQ(param->entries, entries) << name;
    }
    EXPECT_EQ(built.plan.params.size(), 16u);
    // The vocabulary is stripped to original_vocab_size rows, in all three streams.
    const UniversalParam* vocab = find_param(built.plan, kVocab);
    for (std::uint32_t tensor : vocab->tensors) {
        EXPECT_EQ(built.plan.plan.tensors[tensor].shape, (std::vector<std::uint64_t>{50, 16}));
    }
}

TEST(ParallelUniversal, PipelineStagesWithoutRules) {
    const checkpoint::ParallelCheckpointMeta meta = read_meta("pp2_dp2_z1_fp32");
    const Built built = build(meta);
    std::vector<std::string> names;
    for (const UniversalParam& param : built.plan.params) {
        names.push_back(param.name);
        EXPECT_EQ(param.entries, (std::vector<ParamDictEntry>{{"cat_dim", 0, false}}));
        ASSERT_TRUE(param.step.has_value());
    }
    EXPECT_EQ(names,
              (std::vector<std::string>{"0.weight", "0.bias", "1.weight", "1.bias", "4.weight",
                                        "4.bias", "5.weight", "5.bias", "6.weight", "6.bias"}));
    // The engine reads the mp_rank files; the layer files are not copied.
    ASSERT_EQ(built.plan.copies.size(), 2u);
    EXPECT_TRUE(built.plan.copies[0].path.ends_with("/mp_rank_00_model_states.pt"));
    EXPECT_TRUE(built.plan.copies[1].path.ends_with("/mp_rank_01_model_states.pt"));
    EXPECT_FALSE(built.plan.stage3);
    EXPECT_EQ(built.plan.tag, "global_step2");
}

// The run plan: the reference's files, every parameter's files owned by one rank, the copies
// shared out, latest_universal as the index; the same bytes planned at every rank count.
TEST(ParallelUniversal, RunPlanAtSeveralRankCounts) {
    for (const std::string& fixture : testing::parallel_universal_fixtures()) {
        SCOPED_TRACE(fixture);
        run::CheckpointMetadata metadata;
        metadata.meta = read_meta(fixture);
        Options options;
        options.format = OutputFormat::kUniversal;
        std::vector<std::string> first_names;
        for (std::uint32_t ranks = 1; ranks <= 4; ++ranks) {
            run::RunSettings settings;
            settings.options = options;
            settings.ranks = ranks;
            run::RunPlan run = run::build_run_plan(run::tensor_source(metadata, options), settings);
            EXPECT_EQ(run.output_folder, "global_step2_universal");
            ASSERT_TRUE(run.index_name.has_value());
            EXPECT_EQ(*run.index_name, "latest_universal");
            EXPECT_EQ(run.copied_pieces, 2u);
            std::vector<std::string> names = {*run.index_name};
            std::map<std::string, std::set<std::uint32_t>> owners;
            for (const run::OutputFileRecord& file : run.files) {
                names.push_back(file.name());
                const auto zero = file.name().find("/zero/");
                const auto slash = file.name().rfind('/');
                if (zero == std::string::npos || slash <= zero + 6)
                    continue;
                const std::string param = file.name().substr(zero + 6, slash - zero - 6);
                for (std::uint32_t t = 0; t < file.task_count; ++t)
                    owners[param].insert(run.tasks[file.first_task + t].rank);
            }
            for (const auto& [param, ranks_of] : owners)
                EXPECT_EQ(ranks_of.size(), 1u) << param;
            std::sort(names.begin(), names.end());
            EXPECT_EQ(names, tree(testing::parallel_universal_reference(fixture)));
            if (ranks == 1)
                first_names = names;
            EXPECT_EQ(names, first_names);
        }
    }
}

// A two-stage pipeline whose embedding is tied to the last stage, built by hand: stage 0 holds
// [tied (8), 1.weight (3)], stage 1 [2.weight (5), tied (8)], one DP rank each, masters at byte
// 64 of their optimizer file, exp_avg at 1024, exp_avg_sq at 2048. With BF16_Optimizer every
// flat tensor keeps one element of alignment padding at its end.
checkpoint::ParallelCheckpointMeta tied_pipeline_meta(bool bf16) {
    using checkpoint::TensorRef;
    using testing::f32_ref;
    checkpoint::ParallelCheckpointMeta meta;
    meta.kind = checkpoint::ParallelKind::kPipeline;
    meta.pp_degree = 2;
    meta.zero = true;
    meta.grid.folder.tag = "global_step7";
    meta.grid.tp_degree = 1;
    meta.grid.pp_degree = 2;
    meta.grid.model_files = {"/t/mp_rank_00_model_states.pt", "/t/mp_rank_01_model_states.pt"};
    const std::string prefix = bf16 ? "/t/bf16_" : "/t/";
    meta.grid.optim_files = {{prefix + "zero_pp_rank_0_mp_rank_00_optim_states.pt"},
                             {prefix + "zero_pp_rank_0_mp_rank_01_optim_states.pt"}};
    meta.inputs = {meta.grid.model_files[0], meta.grid.model_files[1], meta.grid.optim_files[0][0],
                   meta.grid.optim_files[1][0]};
    meta.input_sizes = {1000, 1000, 4000, 4000};
    const std::vector<std::vector<checkpoint::NamedShape>> shapes[2] = {
        {{{"tied_modules.embed.weight", {4, 2}}, {"1.weight", {3}}}},
        {{{"2.weight", {5}}, {"tied_modules.embed.weight", {4, 2}}}}};
    for (std::uint32_t s = 0; s < 2; ++s) {
        const std::uint64_t numel = (s == 0 ? 11u : 13u) + (bf16 ? 1u : 0u);
        checkpoint::ModelParallelRank rank;
        rank.stage = s;
        rank.model_input = s;
        rank.model.states.module_is_none = true;
        rank.model.states.has_buffer_names = true;
        rank.model.states.shared_params.emplace();
        rank.model.states.param_shapes = shapes[s];
        rank.model.states.mp_world_size = 2;
        checkpoint::OptimFile optim;
        optim.states.layout =
            bf16 ? checkpoint::MasterLayout::kPaddedGroups : checkpoint::MasterLayout::kFlatGroups;
        optim.states.zero_stage = bf16 ? -1 : 1;
        optim.states.partition_count = {1};
        optim.states.master = {f32_ref(2 + s, numel, 64)};
        checkpoint::OptimizerGroupState state;
        state.exp_avg = f32_ref(2 + s, numel, 1024);
        state.exp_avg_sq = f32_ref(2 + s, numel, 2048);
        state.step =
            checkpoint::OptimizerStep{checkpoint::OptimizerStep::Form::kInt, DType::kF32, {}, 7};
        optim.states.group_states = {state};
        checkpoint::PickledGraphBuilder builder(optim.states.global_state.graph, "test");
        checkpoint::PickledNode group;
        group.kind = checkpoint::PickledNode::Kind::kDict;
        checkpoint::PickledNode groups;
        groups.kind = checkpoint::PickledNode::Kind::kList;
        groups.children.push_back(builder.add(group));
        optim.states.global_state.param_groups = builder.add(groups);
        rank.optim.push_back(optim);
        rank.optim_inputs = {2 + s};
        meta.ranks.push_back(rank);
    }
    return meta;
}

// The tied weight is one folder, from stage 0 (stage 1's copies checked equal to it), with stage
// 0's step; the same with BF16_Optimizer's padded partitions.
TEST(ParallelUniversal, TiedPipelineWeightOnceFromItsFirstStage) {
    for (bool bf16 : {false, true}) {
        SCOPED_TRACE(bf16 ? "BF16_Optimizer" : "ZeRO-1");
        checkpoint::ParallelCheckpointMeta meta = tied_pipeline_meta(bf16);
        const UniversalPlan plan = plan_parallel_universal(meta, {});
        ASSERT_EQ(plan.params.size(), 3u);
        EXPECT_EQ(plan.params[0].name, "tied_modules.embed.weight");
        EXPECT_EQ(plan.params[1].name, "1.weight");
        EXPECT_EQ(plan.params[2].name, "2.weight");
        EXPECT_EQ(plan.params[2].group, 0u);
        const std::uint64_t stream_offsets[3] = {64, 1024, 2048};
        for (std::size_t s = 0; s < 3; ++s) {
            const PlannedTensor& tied = plan.plan.tensors[plan.params[0].tensors[s]];
            EXPECT_EQ(tied.shape, (std::vector<std::uint64_t>{4, 2}));
            ASSERT_EQ(tied.pieces.size(), 1u);
            // Written from stage 0's file, stage 1's copy (after its 2.weight) checked against it.
            EXPECT_EQ(tied.pieces[0].combine, PieceCombine::kCheckEqual);
            ASSERT_EQ(tied.pieces[0].sources.size(), 2u);
            EXPECT_EQ(tied.pieces[0].sources[0].front().file, 2u);
            EXPECT_EQ(tied.pieces[0].sources[0].front().offset, stream_offsets[s]);
            EXPECT_EQ(tied.pieces[0].sources[1].front().file, 3u);
            EXPECT_EQ(tied.pieces[0].sources[1].front().offset, stream_offsets[s] + 5 * 4);
            EXPECT_EQ(tied.extents, (std::vector<SourceExtent>{{2, stream_offsets[s], 32}}));
            EXPECT_EQ(plan.plan.tensors[plan.params[1].tensors[s]].extents,
                      (std::vector<SourceExtent>{{2, stream_offsets[s] + 32, 12}}));
            EXPECT_EQ(plan.plan.tensors[plan.params[2].tensors[s]].extents,
                      (std::vector<SourceExtent>{{3, stream_offsets[s], 20}}));
        }
        ASSERT_TRUE(plan.params[0].step.has_value());
        EXPECT_EQ(plan.params[0].step->bits, 7u);

        // A tied copy whose stage has another step cannot be written under one step.pt.
        meta.ranks[1].optim[0].states.group_states[0].step->bits = 8;
        auto [kind, message] = refusal(meta);
        EXPECT_EQ(kind, ErrorKind::kInput);
        EXPECT_NE(message.find("tied parameter 'tied_modules.embed.weight'"), std::string::npos)
            << message;
    }
}

TEST(ParallelUniversal, RefusalsSayWhy) {
    {
        auto [kind, message] = refusal(read_meta("moe_ep2_dp2_z2_fp32"));
        EXPECT_EQ(kind, ErrorKind::kUnsupported);
        EXPECT_NE(message.find("Mixture-of-Experts"), std::string::npos) << message;
    }
    {
        auto [kind, message] = refusal(read_meta("pp2_dp1_z0_fp32"));
        EXPECT_EQ(kind, ErrorKind::kUnsupported);
        EXPECT_NE(message.find("ZeRO-0"), std::string::npos) << message;
        EXPECT_NE(message.find("load_universal"), std::string::npos) << message;
    }
    const checkpoint::ParallelCheckpointMeta tp = read_meta("tp2_dp2_z1_fp32");
    {
        // Averaged replicas: the copy engines compute the means (io/replica_mean.hpp).
        ParallelPlanOptions options;
        options.tp_replicated = ReplicaPolicy::kAverage;
        EXPECT_EQ(refusal(tp, options).first, std::nullopt);
    }
    {
        // Taking TP rank 0's replicas unchecked is allowed; the bytes are the same here.
        ParallelPlanOptions options;
        options.tp_replicated = ReplicaPolicy::kFirst;
        EXPECT_EQ(refusal(tp, options).first, std::nullopt);
    }
    {
        // The SwiGLU weight described as a parameter_with_sub_params entry instead: written with
        // its sub_param_shape object, the count of the entry (universal checkpoint version 0.2)
        // normalized to the sub-parameters' sizes as DeepSpeed's converter does.
        checkpoint::ParallelCheckpointMeta meta = tp;
        for (auto& rank : meta.ranks) {
            auto& info = *rank.model.extras.universal_info;
            info.two_sub_params_cat_dim_0.clear();
            checkpoint::SubParamsSpec spec;
            spec.patterns = {"language_model.encoder.layers.1.mlp.dense_h_to_4h"};
            spec.sub_count = 2;
            spec.shape = {{checkpoint::SubParamShapeDim::Kind::kInt, {2}},
                          {checkpoint::SubParamShapeDim::Kind::kInt, {-1}}};
            info.sub_params.push_back(spec);
        }
        EXPECT_EQ(refusal(meta).first, std::nullopt) << refusal(meta).second;
        const UniversalPlan plan = plan_parallel_universal(meta, {});
        std::size_t objects = 0;
        for (const UniversalParam& param : plan.params) {
            if (!param.name.starts_with("language_model.encoder.layers.1.mlp.dense_h_to_4h"))
                continue;
            ASSERT_EQ(param.entries.size(), 1u) << param.name;
            const SubParamShapeValue& value = *param.entries.front().object;
            EXPECT_TRUE(value.shape_is_tuple);
            EXPECT_EQ(value.shape.front().values.size(), 2u);
            EXPECT_EQ(value.shape.front().values[0], value.shape.front().values[1]);
            ++objects;
        }
        EXPECT_EQ(objects, 2u);  // weight and bias
    }
    {
        // Sub-parameters of recorded uneven widths: the loader's torch.chunk would cut them at
        // other places.
        ParallelPlanOptions options;
        std::string rules = testing::read_text_file(tp2_rules_path());
        const std::string fused =
            R"("language_model\\.encoder\\.layers\\.1\\.mlp\\.dense_h_to_4h\\.": {"merge": "sub_params", "count": 2})";
        ASSERT_NE(rules.find(fused), std::string::npos);
        rules.replace(
            rules.find(fused), fused.size(),
            R"("language_model\\.encoder\\.layers\\.1\\.mlp\\.dense_h_to_4h\\.weight": {"merge": "sub_params", "widths": [[20, 22], [22, 20]]},
               "language_model\\.encoder\\.layers\\.1\\.mlp\\.dense_h_to_4h\\.bias": {"merge": "sub_params", "count": 2})");
        options.tp_rules = TpRuleSet::from_json(rules, "rules.json");
        auto [kind, message] = refusal(tp, options);
        EXPECT_EQ(kind, ErrorKind::kUnsupported);
        EXPECT_NE(message.find("torch.chunk"), std::string::npos) << message;
        EXPECT_NE(message.find("dense_h_to_4h.weight"), std::string::npos) << message;
    }
    {
        // TP rank 1's step differs from TP rank 0's.
        checkpoint::ParallelCheckpointMeta meta = tp;
        for (auto& optim : meta.ranks[1].optim)
            optim.states.group_states[0].step->bits ^= 1;
        auto [kind, message] = refusal(meta);
        EXPECT_EQ(kind, ErrorKind::kInput);
        EXPECT_NE(message.find("TP rank 0"), std::string::npos) << message;
    }
}

// The --tp-rules form of the same checkpoint (equal sub-parameters by count) gives the same
// plan as its own universal_checkpoint_info.
TEST(ParallelUniversal, TpRulesFileGivesTheSameFiles) {
    checkpoint::ParallelCheckpointMeta meta = read_meta("tp2_dp2_z1_fp32");
    const Built own = build(meta);
    ParallelPlanOptions options;
    options.tp_rules =
        TpRuleSet::from_json(testing::read_text_file(tp2_rules_path()), tp2_rules_path());
    for (auto& rank : meta.ranks)
        rank.model.extras.universal_info.reset();
    const Built ruled = build(meta, options);
    ASSERT_EQ(own.files.size(), ruled.files.size());
    for (std::size_t f = 0; f < own.files.size(); ++f) {
        SCOPED_TRACE(own.files[f].path);
        EXPECT_EQ(own.files[f].path, ruled.files[f].path);
        EXPECT_EQ(own.files[f].size, ruled.files[f].size);
        EXPECT_TRUE(own.files[f].bytes == ruled.files[f].bytes);
        EXPECT_EQ(own.files[f].layout.fixed.size(), ruled.files[f].layout.fixed.size());
        for (std::size_t r = 0; r < own.files[f].layout.fixed.size(); ++r) {
            EXPECT_TRUE(own.files[f].layout.fixed[r].bytes == ruled.files[f].layout.fixed[r].bytes);
        }
    }
}

}  // namespace
}  // namespace z2f::plan
