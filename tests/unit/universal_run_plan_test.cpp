// The RunPlan of --format universal, built without MPI from the real fixtures' metadata: files,
// tasks and owners at several rank counts (a rank owns whole parameters), byte copies of the
// model-states files, latest_universal as the index, the options that do not apply, and the
// ownership by units it rests on.
#include <algorithm>
#include <functional>
#include <map>
#include <random>
#include <set>

#include <gtest/gtest.h>

#include "checkpoint/assemble.hpp"
#include "checkpoint/discovery.hpp"
#include "output/universal_layout.hpp"
#include "plan/unit_ownership.hpp"
#include "run/run_plan.hpp"
#include "support/fixture_plans.hpp"
#include "support/test_files.hpp"
#include "zero2fp32/error.hpp"
#include "zero2fp32/plan.hpp"

namespace z2f::run {
namespace {

using testing::fixture_meta;

Options universal() {
    Options options;
    options.format = OutputFormat::kUniversal;
    return options;
}

RunPlan build(const checkpoint::CheckpointMeta& meta, std::uint32_t ranks,
              Options options = universal()) {
    return testing::build_plan(meta, ranks, options);
}

// "global_step2_universal/zero/<param>/fp32.pt" -> "<param>"; "" for files of no parameter.
std::string param_of(const std::string& name) {
    const std::string zero = "_universal/zero/";
    auto at = name.find(zero);
    if (at == std::string::npos)
        return "";
    auto begin = at + zero.size();
    auto slash = name.find('/', begin);
    return slash == std::string::npos ? "" : name.substr(begin, slash - begin);
}

plan::WriteTask task(std::uint32_t file, std::uint32_t begin, std::uint32_t end,
                     std::uint64_t bytes) {
    plan::WriteTask t;
    t.file = file;
    t.begin = begin;  // bytes numbered like the slots: ownership only checks the tiling
    t.end = end;
    t.slot_begin = begin;
    t.slot_end = end;
    t.bytes = bytes;
    return t;
}

// The ranks of the units' first tasks, in unit order (units of one task each).
std::vector<std::uint32_t> unit_ranks(const std::vector<std::uint64_t>& weights,
                                      std::uint32_t ranks, std::vector<std::uint64_t>* loads) {
    std::vector<plan::OwnershipUnit> units;
    for (std::uint32_t u = 0; u < weights.size(); ++u)
        units.push_back({{task(u, 0, 1, weights[u])}, weights[u]});
    plan::Ownership owned =
        plan::assign_unit_ownership(units, static_cast<std::uint32_t>(weights.size()), ranks);
    if (loads != nullptr)
        *loads = owned.bytes_per_rank;
    std::vector<std::uint32_t> result;
    for (const plan::WriteTask& t : owned.tasks)  // ordered by file = unit
        result.push_back(t.rank);
    return result;
}

TEST(UnitOwnership, ContiguousRunsWhenTheyBalanceAsWell) {
    // Largest-first would give 0, 1, 0, 1 (every neighbour on the other rank); the runs balance
    // as well and keep neighbours together.
    std::vector<std::uint64_t> loads;
    EXPECT_EQ(unit_ranks({4, 4, 4, 4}, 2, &loads), (std::vector<std::uint32_t>{0, 0, 1, 1}));
    EXPECT_EQ(loads, (std::vector<std::uint64_t>{8, 8}));
    // The lightest runs that fit: 4, 4, 2 (limit 4), not 3, 3, 3, 1 (4 runs) nor 5, 5, 0.
    EXPECT_EQ(unit_ranks({1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, 3, &loads),
              (std::vector<std::uint32_t>{0, 0, 0, 0, 1, 1, 1, 1, 2, 2}));
    EXPECT_EQ(loads, (std::vector<std::uint64_t>{4, 4, 2}));
    // Within 1 % of largest-first's heaviest rank (201: 199 + 2, and 100 + 100): runs, 202.
    EXPECT_EQ(unit_ranks({199, 100, 100, 2}, 2, &loads), (std::vector<std::uint32_t>{0, 1, 1, 1}));
    EXPECT_EQ(loads, (std::vector<std::uint64_t>{199, 202}));
    // More ranks than units, and units that weigh nothing.
    EXPECT_EQ(unit_ranks({3, 3}, 4, &loads), (std::vector<std::uint32_t>{0, 1}));
    EXPECT_EQ(unit_ranks({0, 0, 0}, 2, &loads), (std::vector<std::uint32_t>{0, 0, 0}));
}

// The lightest heaviest rank of any cut of `weights`, in order, into at most `ranks` runs
// (every cut tried).
std::uint64_t best_runs(const std::vector<std::uint64_t>& weights, std::uint32_t ranks) {
    std::uint64_t best = ~std::uint64_t{0};
    std::function<void(std::size_t, std::uint32_t, std::uint64_t)> cut =
        [&](std::size_t from, std::uint32_t left, std::uint64_t heaviest) {
            if (from == weights.size()) {
                best = std::min(best, heaviest);
                return;
            }
            if (left == 0)
                return;
            std::uint64_t run = 0;
            for (std::size_t to = from; to < weights.size(); ++to) {
                run += weights[to];
                cut(to + 1, left - 1, std::max(heaviest, run));
            }
        };
    cut(0, ranks, 0);
    return best;
}

TEST(UnitOwnership, RunsAreTheBestCutOrLoseByMoreThanOnePercent) {
    std::mt19937 random(20261204);
    for (int trial = 0; trial < 400; ++trial) {
        std::vector<std::uint64_t> weights(1 + random() % 8);
        for (std::uint64_t& weight : weights)
            weight = random() % 4 == 0 ? random() % 1000 : 100 + random() % 20;
        const auto ranks = static_cast<std::uint32_t>(1 + random() % 4);
        std::vector<std::uint64_t> loads;
        const std::vector<std::uint32_t> got = unit_ranks(weights, ranks, &loads);
        std::uint64_t total = 0;
        for (std::uint64_t weight : weights)
            total += weight;
        std::uint64_t sum = 0;
        for (std::uint64_t load : loads)
            sum += load;
        ASSERT_EQ(sum, total);
        ASSERT_TRUE(
            std::all_of(got.begin(), got.end(), [&](std::uint32_t r) { return r < ranks; }));
        const std::uint64_t heaviest = *std::max_element(loads.begin(), loads.end());
        const std::uint64_t runs = best_runs(weights, ranks);
        if (std::is_sorted(got.begin(), got.end())) {
            // Runs (or largest-first happening to give runs): then the best cut.
            EXPECT_EQ(heaviest, runs) << "trial " << trial;
        } else {
            // Largest-first: the best runs were more than 1 % heavier.
            EXPECT_GT(runs, heaviest + heaviest / 100) << "trial " << trial;
        }
    }
}

TEST(UnitOwnership, LargestFirstWhenRunsBalanceWorse) {
    // A large unit between two small ones: runs need a rank of 400, largest-first has 300.
    std::vector<std::uint64_t> loads;
    EXPECT_EQ(unit_ranks({100, 300, 100}, 2, &loads), (std::vector<std::uint32_t>{1, 0, 1}));
    EXPECT_EQ(loads, (std::vector<std::uint64_t>{300, 200}));
}

TEST(UnitOwnership, LargestUnitFirstToTheLeastLoadedRank) {
    // Weights 5, 9, 4, 4 on 2 ranks (runs: 14 and 8 at best, more than 1 % over 13):
    // 9 -> 0, 5 -> 1, the first 4 -> 1, the second 4 -> 0 (loads 9 and 9: a tie goes to the
    // lower rank).
    std::vector<plan::OwnershipUnit> units(4);
    units[0] = {{task(0, 0, 1, 5)}, 5};
    units[1] = {{task(1, 0, 1, 9), task(2, 0, 0, 0)}, 9};
    units[2] = {{task(3, 0, 1, 4)}, 4};
    units[3] = {{task(4, 0, 1, 2), task(4, 1, 2, 2)}, 4};
    plan::Ownership owned = plan::assign_unit_ownership(units, 5, 2);
    ASSERT_EQ(owned.tasks.size(), 6u);
    std::vector<std::uint32_t> ranks;
    for (const plan::WriteTask& t : owned.tasks)
        ranks.push_back(t.rank);
    EXPECT_EQ(ranks, (std::vector<std::uint32_t>{1, 0, 0, 1, 0, 0}));
    EXPECT_EQ(owned.bytes_per_rank, (std::vector<std::uint64_t>{13, 9}));
    EXPECT_EQ(owned.tasks_per_file, (std::vector<std::uint32_t>{1, 1, 1, 1, 2}));
    EXPECT_TRUE(owned.tasks[4].lead);
    EXPECT_FALSE(owned.tasks[5].lead);
    // The same whatever order the units are listed in, up to equal weights.
    std::vector<plan::OwnershipUnit> reversed(units.rbegin(), units.rend());
    EXPECT_EQ(plan::assign_unit_ownership(reversed, 5, 2).bytes_per_rank,
              (std::vector<std::uint64_t>{13, 9}));
}

TEST(UnitOwnership, TasksThatDoNotTileTheirFileAreABug) {
    std::vector<plan::OwnershipUnit> gap = {{{task(0, 0, 1, 1), task(0, 2, 3, 1)}, 2}};
    EXPECT_THROW(plan::assign_unit_ownership(gap, 1, 2), Error);
    std::vector<plan::OwnershipUnit> missing = {{{task(0, 0, 1, 1)}, 1}};
    EXPECT_THROW(plan::assign_unit_ownership(missing, 2, 2), Error);
    EXPECT_THROW(plan::assign_unit_ownership(missing, 1, 0), Error);
}

TEST(UniversalRunPlan, EveryFileTiledByItsTasksAndEachParameterOnOneRank) {
    for (const char* fixture : {"z1_ws2_fp32", "z2_ws2_twogroups_fp32", "z2_ws2_frozen_bf16",
                                "z3_ws4_fp32", "z3_ws2_tied_fp32", "z1_ws2_bf16opt"}) {
        checkpoint::CheckpointMeta meta = fixture_meta(fixture);
        const bool stage3 = meta.layout == checkpoint::MasterLayout::kPerParam;
        for (std::uint32_t ranks = 1; ranks <= 5; ++ranks) {
            SCOPED_TRACE(std::string(fixture) + " ranks " + std::to_string(ranks));
            RunPlan plan = build(meta, ranks);
            EXPECT_EQ(plan.format, OutputFormat::kUniversal);
            EXPECT_EQ(plan.output_folder, "global_step2_universal");
            ASSERT_EQ(plan.index_name, std::optional<std::string>("latest_universal"));
            EXPECT_EQ(plan.index_json, "global_step2_universal");
            std::map<std::string, std::set<std::uint32_t>> ranks_of_param;
            std::map<std::string, std::size_t> files_of_param;
            std::size_t copies = 0;
            for (std::uint32_t f = 0; f < plan.files.size(); ++f) {
                const OutputFileRecord& file = plan.files[f];
                EXPECT_TRUE(file.name().starts_with(plan.output_folder + "/")) << file.name();
                ASSERT_GE(file.task_count, 1u);
                std::uint32_t next = 0;
                for (std::uint32_t t = file.first_task; t < file.first_task + file.task_count;
                     ++t) {
                    const plan::WriteTask& task = plan.tasks[t];
                    EXPECT_EQ(task.file, f);
                    EXPECT_EQ(task.lead, t == file.first_task);
                    EXPECT_EQ(task.slot_begin, next);
                    EXPECT_LT(task.rank, ranks);
                    next = task.slot_end;
                    if (!param_of(file.name()).empty())
                        ranks_of_param[param_of(file.name())].insert(task.rank);
                }
                EXPECT_EQ(next, file.layout.slots.size()) << file.name();
                files_of_param[param_of(file.name())] += 1;
                // Fixed regions and slots cover the file; the tail follows from the slot CRC.
                std::uint64_t covered = 0;
                for (const output::FixedRegion& region : file.layout.fixed)
                    covered += region.bytes.size();
                for (const output::TensorSlot& slot : file.layout.slots)
                    covered += slot.length;
                for (const output::FixedRegion& region : output::crc_tail(
                         file.layout, std::vector<std::uint32_t>(file.layout.slots.size(), 0)))
                    covered += region.bytes.size();
                EXPECT_EQ(covered, file.layout.size) << file.name();
                if (file.name().ends_with("_model_states.pt")) {
                    ++copies;
                    EXPECT_TRUE(file.layout.fixed.empty());
                    EXPECT_EQ(file.header_length, 0u);
                    for (const output::TensorSlot& slot : file.layout.slots) {
                        const plan::PlannedTensor& piece = plan.tensors.tensors.at(slot.tensor);
                        EXPECT_EQ(piece.source_dtype, DType::kU8);
                        EXPECT_EQ(piece.output_dtype, DType::kU8);
                        ASSERT_EQ(piece.extents.size(), 1u);
                        EXPECT_EQ(piece.extents[0].offset, slot.offset);
                        EXPECT_EQ(piece.extents[0].length, slot.length);
                        EXPECT_EQ(
                            meta.inputs.at(piece.extents[0].file)
                                .substr(meta.inputs.at(piece.extents[0].file).find_last_of('/')),
                            file.name().substr(file.name().find_last_of('/')));
                    }
                }
            }
            EXPECT_EQ(copies, meta.files.model_files.size());
            for (const auto& [param, owners] : ranks_of_param)
                EXPECT_EQ(owners.size(), 1u) << param;
            for (const auto& [param, count] : files_of_param) {
                if (!param.empty()) {
                    EXPECT_EQ(count, stage3 ? 3u : 4u) << param;  // step.pt at stage 1/2
                }
            }
            // The public view: three tensors per parameter, no piece of a copy.
            ConversionPlan view = conversion_plan_view(plan);
            EXPECT_EQ(view.tensors.size(), 3 * ranks_of_param.size());
            EXPECT_EQ(view.tensors.size() + plan.copied_pieces, plan.tensors.tensors.size());
            EXPECT_EQ(view.files.size(), plan.files.size());
            for (const ConversionPlan::Tensor& tensor : view.tensors)
                EXPECT_EQ(tensor.dtype, DType::kF32) << tensor.name;
        }
    }
}

TEST(UniversalRunPlan, ParametersAreBalancedByBytes) {
    checkpoint::CheckpointMeta meta = fixture_meta("z2_ws2_twogroups_fp32");
    for (std::uint32_t ranks = 2; ranks <= 4; ++ranks) {
        RunPlan plan = build(meta, ranks);
        std::vector<std::uint64_t> load(ranks, 0);
        std::map<std::string, std::uint64_t> unit;
        for (const OutputFileRecord& file : plan.files) {
            load.at(plan.lead_of(static_cast<std::uint32_t>(&file - plan.files.data())).rank) +=
                file.layout.size;
            unit[param_of(file.name()).empty() ? file.name() : param_of(file.name())] +=
                file.layout.size;
        }
        std::uint64_t largest = 0;
        for (const auto& [name, bytes] : unit)
            largest = std::max(largest, bytes);
        const auto [low, high] = std::minmax_element(load.begin(), load.end());
        // Largest first to the least loaded: no rank ends more than one unit above another.
        EXPECT_LE(*high - *low, largest) << ranks;
    }
}

TEST(UniversalRunPlan, LargeModelStatesCopiesAreCutIntoPiecesOfSeveralRanks) {
    checkpoint::CheckpointMeta meta = fixture_meta("z2_ws2_fp32");
    // As if the module weights made the model-states file 200 MiB (only the sizes are planned).
    const std::uint64_t size = 200ull << 20;
    meta.input_sizes[0] = size;
    for (std::uint32_t ranks : {1u, 2u, 4u, 8u}) {
        SCOPED_TRACE(ranks);
        RunPlan plan = build(meta, ranks);
        auto copy = std::find_if(plan.files.begin(), plan.files.end(), [](const auto& file) {
            return file.name().ends_with("/mp_rank_00_model_states.pt");
        });
        ASSERT_NE(copy, plan.files.end());
        EXPECT_EQ(copy->layout.size, size);
        // At least 64 MiB per piece, at most one piece per rank: 1, 2, 4, 4 pieces.
        const std::size_t pieces = std::min<std::size_t>(ranks, 4);
        ASSERT_EQ(copy->layout.slots.size(), pieces);
        EXPECT_EQ(copy->task_count, pieces);
        EXPECT_EQ(plan.copied_pieces, pieces);
        std::uint64_t next = 0;
        std::set<std::uint32_t> owners;
        for (std::uint32_t t = copy->first_task; t < copy->first_task + copy->task_count; ++t) {
            const output::TensorSlot& slot = copy->layout.slots.at(plan.tasks[t].slot_begin);
            EXPECT_EQ(slot.offset, next);
            EXPECT_EQ(slot.offset % Options{}.block_size, 0u) << "pieces start at block multiples";
            next += slot.length;
            owners.insert(plan.tasks[t].rank);
        }
        EXPECT_EQ(next, size);
        EXPECT_EQ(owners.size(), pieces);  // the pieces outweigh everything else
        std::uint64_t reads = plan.bytes_to_read().at(0);
        EXPECT_EQ(reads, size);
    }
}

TEST(UniversalRunPlan, ReadsTheThreeStreamsAndTheCopiedFilesOnly) {
    checkpoint::CheckpointMeta meta = fixture_meta("z3_ws2_tied_fp32");
    RunPlan plan = build(meta, 3);
    std::uint64_t expected = 0;
    for (const plan::PlannedTensor& tensor : plan.tensors.tensors)
        expected += tensor.source_bytes();
    std::uint64_t reads = 0;
    for (std::uint64_t bytes : plan.bytes_to_read())
        reads += bytes;
    EXPECT_EQ(reads, expected);
    std::uint64_t copied = 0;
    for (const std::string& model : meta.files.model_files)
        copied += testing::read_file_bytes(model).size();
    // Two 3-parameter streams per rank's optimizer file: masters and moments, 12 bytes per
    // element, plus the model-states files whole.
    std::uint64_t elements = 0;
    for (std::size_t i = 0; i + plan.copied_pieces < plan.tensors.tensors.size(); i += 3)
        elements += plan.tensors.tensors[i].numel();
    EXPECT_EQ(reads, 12 * elements + copied);
}

TEST(UniversalRunPlan, OptionsThatShapeHuggingFaceOutputAreUsageErrors) {
    auto usage = [&](auto tweak) {
        Options options = universal();
        tweak(options);
        try {
            validate_options(options);
        } catch (const Error& error) {
            return error.kind() == ErrorKind::kUsage;
        }
        return false;
    };
    EXPECT_TRUE(usage([](Options& o) { o.dtype = DType::kBF16; }));
    EXPECT_TRUE(usage([](Options& o) { o.cast_all_buffers = true; }));
    EXPECT_TRUE(usage([](Options& o) { o.keep_frozen_dtype = true; }));
    EXPECT_TRUE(usage([](Options& o) { o.stage1_frozen = Stage1Frozen::kSkip; }));
    EXPECT_TRUE(usage([](Options& o) { o.exclude_frozen = true; }));
    EXPECT_TRUE(usage([](Options& o) { o.untie = true; }));
    EXPECT_TRUE(usage([](Options& o) { o.include = {"fc1"}; }));
    EXPECT_TRUE(usage([](Options& o) { o.exclude = {"fc1"}; }));
    EXPECT_TRUE(usage([](Options& o) { o.strip_prefixes = {"_orig_mod."}; }));
    // Not used, not refused: the library cannot tell the default shard size from a chosen one.
    EXPECT_FALSE(usage([](Options& o) { o.max_shard_size.reset(); }));
    EXPECT_FALSE(usage([](Options& o) { o.copy_hf_files = false; }));
    EXPECT_FALSE(usage([](Options&) {}));
}

TEST(UniversalRunPlan, IdentityIsTheFormatsAndNotTheRankCounts) {
    checkpoint::CheckpointMeta meta = fixture_meta("z2_ws2_fp32");
    EXPECT_EQ(build(meta, 1).identity, build(meta, 4).identity);
    EXPECT_NE(build(meta, 1).identity, build(meta, 1, Options{}).identity);
}

TEST(UniversalRunPlan, UniversalInputIsNotConvertedToUniversalAgain) {
    // Whatever discovery calls universal (layout kWholeParams) is refused by plan_universal.
    checkpoint::CheckpointMeta meta = fixture_meta("z3_ws2_fp32");
    meta.layout = checkpoint::MasterLayout::kWholeParams;
    try {
        build(meta, 2);
        ADD_FAILURE() << "planned a universal checkpoint of a universal checkpoint";
    } catch (const Error& error) {
        EXPECT_EQ(error.kind(), ErrorKind::kUnsupported);
        EXPECT_NE(std::string(error.what()).find("universal checkpoint already"), std::string::npos)
            << error.what();
    }
}

TEST(UniversalRunPlan, TensorAndPipelineParallelModelsAreRefused) {
    checkpoint::CheckpointMeta meta = fixture_meta("z2_ws2_fp32");
    // Tensor parallelism records its degree in mp_world_size too; tp_degree 2 with
    // mp_world_size 1 is sequence parallelism (docs/deepspeed-format.md §11), planned as usual.
    meta.model.tp_degree = 2;
    EXPECT_NO_THROW(build(meta, 1));
    meta.model.mp_world_size = 2;
    try {
        build(meta, 1);
        ADD_FAILURE() << "planned a tensor-parallel universal checkpoint";
    } catch (const Error& error) {
        EXPECT_EQ(error.kind(), ErrorKind::kUnsupported);
        EXPECT_NE(std::string(error.what()).find("tensor- or pipeline-parallel"), std::string::npos)
            << error.what();
    }
}

TEST(UniversalConversionPlanView, ListsEveryParametersThreeTensorsAndTheirFiles) {
    ConversionPlan plan = plan_conversion(testing::fixture_path("z1_ws2_fp32"), universal());
    EXPECT_EQ(plan.format, OutputFormat::kUniversal);
    EXPECT_EQ(plan.index, std::optional<std::string>("latest_universal"));
    ASSERT_EQ(plan.tensors.size(), 3u * 8);
    const ConversionPlan::Tensor& temp =
        *std::find_if(plan.tensors.begin(), plan.tensors.end(),
                      [](const auto& t) { return t.name == "temp/fp32"; });
    EXPECT_EQ(temp.shape, (std::vector<std::uint64_t>{1}));  // a 0-dim parameter stored as (1,)
    EXPECT_EQ(temp.file, "global_step2_universal/zero/temp/fp32.pt");
    std::set<std::string> files;
    for (const ConversionPlan::File& file : plan.files)
        files.insert(file.name);
    EXPECT_EQ(files.count("global_step2_universal/zero/temp/step.pt"), 1u);
    EXPECT_EQ(files.count("global_step2_universal/zero/optimizer_state.pt"), 1u);
    EXPECT_EQ(files.count("global_step2_universal/mp_rank_00_model_states.pt"), 1u);
    EXPECT_EQ(files.size(), 8u * 4 + 2);
}

}  // namespace
}  // namespace z2f::run
