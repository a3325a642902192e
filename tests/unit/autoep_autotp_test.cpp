// The rules of DeepSpeed's AutoEP and AutoTP + ZeRO-3 layouts (docs/parallel-checkpoints.md
// §1, §5.2), without MPI: the AutoEP metadata and partition groups as read from pickles (every
// malformed entry an input error naming the file and the value), the expert-parallel places of
// ZeRO-1/2, the router alias, the fused expert weights and the tp x dp file grid on the real
// fixtures (tests/data/deepspeed-newest) and on hand-made variants, and the universal
// sub_param_shape object.
#include <map>
#include <variant>

#include <gtest/gtest.h>

#include "checkpoint/assemble.hpp"
#include "checkpoint/autoep_views.hpp"
#include "checkpoint/discovery.hpp"
#include "checkpoint/field.hpp"
#include "checkpoint/file_grid.hpp"
#include "checkpoint/meta_codec.hpp"
#include "checkpoint/parallel_assemble.hpp"
#include "checkpoint/states_reader.hpp"
#include "container/torch_file.hpp"
#include "output/universal_layout.hpp"
#include "pickle/pickle_writer.hpp"
#include "plan/autoep_plan.hpp"
#include "plan/parallel_plan.hpp"
#include "plan/universal_plan.hpp"
#include "support/test_files.hpp"
#include "support/zip_builder.hpp"
#include "zero2fp32/error.hpp"

namespace z2f {
namespace {

std::string newest(const std::string& fixture) {
    return std::string(Z2F_TEST_DATA) + "/deepspeed-newest/" + fixture;
}

// --- a Python value, pickled by our writer, in a torch zip ------------------------------------

struct Py;
using PyList = std::vector<Py>;
using PyDict = std::vector<std::pair<std::string, Py>>;
struct Py {
    std::variant<std::monostate, bool, std::int64_t, std::string, PyList, PyDict> value;
    Py() = default;
    Py(bool b) : value(b) {}                      // NOLINT: literals read as Python values
    Py(int i) : value(std::int64_t{i}) {}         // NOLINT
    Py(const char* s) : value(std::string(s)) {}  // NOLINT
    Py(PyList l) : value(std::move(l)) {}         // NOLINT
    Py(PyDict d) : value(std::move(d)) {}         // NOLINT
};

void write_py(pickle::PickleWriter& writer, const Py& py) {
    if (std::holds_alternative<std::monostate>(py.value)) {
        writer.none();
    } else if (const auto* b = std::get_if<bool>(&py.value)) {
        writer.boolean(*b);
    } else if (const auto* i = std::get_if<std::int64_t>(&py.value)) {
        writer.integer(*i);
    } else if (const auto* s = std::get_if<std::string>(&py.value)) {
        writer.unicode(*s);
    } else if (const auto* l = std::get_if<PyList>(&py.value)) {
        writer.empty_list();
        pickle::write_appends(writer, l->size(), [&](std::size_t k) { write_py(writer, (*l)[k]); });
    } else {
        const auto& d = std::get<PyDict>(py.value);
        writer.empty_dict();
        pickle::write_setitems(writer, d.size(), [&](std::size_t k) {
            writer.unicode(d[k].first);
            write_py(writer, d[k].second);
        });
    }
}

container::TorchFile torch_file(const testing::TempDir& dir, const Py& root) {
    pickle::PickleWriter writer(pickle::MemoPolicy::kLikePython);
    write_py(writer, root);
    std::vector<testing::ZipBuilderEntry> entries = {
        {"archive/data.pkl", writer.finish(), 0, {}, 0, true},
        {"archive/version", testing::bytes_of("3\n"), 0, {}, 0, true},
    };
    testing::write_file_bytes(dir.file("file.pt"), testing::build_zip(entries));
    return container::TorchFile::open(dir.file("file.pt"));
}

PyDict layer(int id, const char* prefix, int experts, int local, int ep) {
    return {{"moe_layer_id", id},
            {"module_path", "m"},
            {"num_experts", experts},
            {"num_local_experts", local},
            {"ep_size", ep},
            {"expert_key_prefix", prefix},
            {"checkpoint_format", "per_expert_files"}};
}

PyDict zero3_layer(int ep_rank) {
    PyDict entry = layer(0, "m.experts", 4, 2, 2);
    entry.back().second = "zero3_partitioned";
    entry.emplace_back("checkpoint_format_version", 1);
    entry.emplace_back("ep_rank", ep_rank);
    entry.emplace_back("expert_data_parallel_rank", 0);
    entry.emplace_back("expert_data_parallel_world_size", 1);
    entry.emplace_back("global_expert_start", 2 * ep_rank);
    entry.emplace_back("global_expert_end", 2 * ep_rank + 2);
    return entry;
}

checkpoint::AutoEpInfo read_layers(const Py& layers, const Py& config = Py()) {
    testing::TempDir dir;
    PyDict root = {{"module", PyDict{}}, {"ds_autoep_layers", layers}};
    if (!std::holds_alternative<std::monostate>(config.value))
        root.emplace_back("ds_config", config);
    container::TorchFile file = torch_file(dir, root);
    return checkpoint::read_model_states(file, 0, checkpoint::ModelFileScope::kFrozenFragmentsOnly)
        .autoep;
}

// The message of an input error `body` throws ("" when it does not throw one).
template <typename Body>
std::string input_error(Body&& body) {
    try {
        body();
    } catch (const Error& error) {
        EXPECT_EQ(error.kind(), ErrorKind::kInput) << error.what();
        return error.what();
    }
    return "";
}

TEST(AutoEpMeta, LayersOfBothFormats) {
    checkpoint::AutoEpInfo info =
        read_layers(PyList{layer(0, "a.experts", 8, 2, 4), layer(3, "b.experts", 8, 2, 4)},
                    PyDict{{"use_data_before_expert_parallelism", true}});
    ASSERT_EQ(info.layers.size(), 2u);
    EXPECT_EQ(info.layers[1].moe_layer_id, 3);
    EXPECT_EQ(info.layers[1].expert_key_prefix, "b.experts");
    EXPECT_EQ(info.layers[0].num_experts, 8u);
    EXPECT_FALSE(info.zero3_partitioned());
    EXPECT_TRUE(info.data_before_expert_parallel);

    checkpoint::AutoEpInfo zero3 = read_layers(PyList{zero3_layer(1)});
    ASSERT_TRUE(zero3.zero3_partitioned());
    EXPECT_EQ(zero3.layers[0].ep_rank, 1);
    EXPECT_EQ(zero3.layers[0].expert_data_parallel_world_size, 1);
    EXPECT_FALSE(read_layers(Py()).present());

    // The real files: every rank's place.
    for (int rank : {0, 1}) {
        container::TorchFile file = container::TorchFile::open(
            newest("autoep_ep2_z3_ws2_fp32") + "/global_step2/zero_pp_rank_" +
            std::to_string(rank) + "_mp_rank_00_model_states.pt");
        checkpoint::AutoEpInfo real =
            checkpoint::read_model_states(file, 0, checkpoint::ModelFileScope::kFull).autoep;
        ASSERT_EQ(real.layers.size(), 2u);
        EXPECT_EQ(real.layers[1].ep_rank, rank);
        EXPECT_EQ(real.layers[1].module_path, "model.layers.1.mlp");
    }
}

TEST(AutoEpMeta, MalformedLayersNameTheValue) {
    struct Case {
        Py layers;
        const char* expected;
    };
    PyDict missing = layer(0, "m.experts", 4, 2, 2);
    missing.erase(missing.begin() + 2);  // num_experts
    PyDict wrong_range = zero3_layer(1);
    wrong_range[wrong_range.size() - 2].second = 0;  // global_expert_start
    PyDict far_rank = zero3_layer(1);
    far_rank[8].second = 2;  // ep_rank
    PyDict version = zero3_layer(0);
    version[7].second = 2;
    PyDict no_place = zero3_layer(0);
    no_place.erase(no_place.begin() + 8);  // ep_rank
    const std::vector<Case> cases = {
        {PyDict{{"m", layer(0, "m.experts", 4, 2, 2)}}, "expected a list of AutoEP layer dicts"},
        {PyList{"layer"}, "expected an AutoEP layer dict"},
        {PyList{missing}, "num_experts"},
        {PyList{layer(0, "m.experts", 6, 2, 2)}, "num_local_experts (2) x ep_size (2)"},
        {PyList{layer(0, "m.experts", 4, 0, 2)}, "expected a positive int"},
        {PyList{layer(0, "a", 4, 2, 2), layer(0, "b", 4, 2, 2)}, "moe_layer_id no other"},
        {PyList{layer(0, "a", 4, 2, 2), layer(1, "a", 4, 2, 2)}, "expert_key_prefix no other"},
        {PyList{wrong_range}, "the expert range [2, 4) of ep_rank 1"},
        {PyList{far_rank}, "below ep_size 2"},
        {PyList{version}, "format version 1"},
        {PyList{no_place}, "ep_rank"},
        {PyList{}, "at least one AutoEP layer"},
    };
    for (const Case& c : cases) {
        const std::string message = input_error([&] { read_layers(c.layers); });
        EXPECT_NE(message.find(c.expected), std::string::npos) << message;
        EXPECT_NE(message.find("file.pt"), std::string::npos) << message;
        EXPECT_NE(message.find("ds_autoep_layers"), std::string::npos) << message;
    }
    const std::string config = input_error([&] {
        read_layers(PyList{layer(0, "m.experts", 4, 2, 2)},
                    PyDict{{"use_data_before_expert_parallelism", 1}});
    });
    EXPECT_NE(config.find("use_data_before_expert_parallelism"), std::string::npos) << config;
}

std::vector<checkpoint::ZeroPartitionGroup> read_groups(const Py& groups) {
    testing::TempDir dir;
    container::TorchFile file = torch_file(dir, PyDict{{"ds_zero_partition_groups", groups}});
    checkpoint::Field root(file, file.root(), "");
    return checkpoint::read_zero_partition_groups(root);
}

TEST(AutoEpMeta, PartitionGroups) {
    std::vector<checkpoint::ZeroPartitionGroup> groups = read_groups(PyList{
        PyDict{{"partition_count", 2}, {"partition_rank", 1}, {"partition_ranks", PyList{0, 1}}},
        PyDict{{"partition_count", 1},
               {"partition_rank", 0},
               {"partition_ranks", PyList{3}},
               {"families", PyList{"autoep_expert"}}}});
    ASSERT_EQ(groups.size(), 2u);
    EXPECT_EQ(groups[0].rank, 1);
    EXPECT_EQ(groups[1].ranks, (std::vector<std::uint64_t>{3}));
    EXPECT_EQ(groups[1].families, (std::vector<std::string>{"autoep_expert"}));
    EXPECT_NE(input_error([] { read_groups(PyDict{}); }).find("a list of partition group dicts"),
              std::string::npos);
    EXPECT_NE(input_error([] {
                  read_groups(PyList{PyDict{{"partition_count", 2}, {"partition_rank", 2}}});
              }).find("a rank below partition_count"),
              std::string::npos);
    EXPECT_NE(input_error([] {
                  read_groups(
                      PyList{PyDict{{"partition_count", 2}, {"partition_ranks", PyList{0, 1, 2}}}});
              }).find("partition_count (2) ranks"),
              std::string::npos);
    EXPECT_NE(input_error([] {
                  read_groups(PyList{PyDict{{"partition_count", 0}}});
              }).find("a positive int"),
              std::string::npos);
}

// What crosses MPI: every file's metadata and the grid, through the wire codec and back.
TEST(AutoEpMeta, CodecRoundTripsTheNewFixtures) {
    for (const char* name :
         {"autoep_ep2_z1_ws2_fp32", "autotp_tp2_z3_ws2_bf16", "autotp_tp2_z1_ws2_fp32"}) {
        checkpoint::FileGrid grid = checkpoint::discover_file_grid(newest(name), "");
        checkpoint::FileGrid decoded =
            checkpoint::decode_file_grid(checkpoint::encode_file_grid(grid));
        EXPECT_EQ(decoded.zero3_model_files, grid.zero3_model_files) << name;
        EXPECT_EQ(decoded.model_files, grid.model_files) << name;
        auto inputs = checkpoint::parallel_inputs(grid);
        WireWriter out;
        std::vector<checkpoint::FileMeta> originals;
        for (std::size_t i = 0; i < inputs.size(); ++i) {
            originals.push_back(
                checkpoint::read_file_meta(inputs[i], static_cast<std::uint32_t>(i)));
            checkpoint::encode_file_meta(originals.back(), out);
        }
        WireReader in(out.bytes(), "test");
        for (const checkpoint::FileMeta& original : originals)
            EXPECT_EQ(checkpoint::decode_file_meta(in), original) << name;
        EXPECT_TRUE(in.at_end());
    }
    const checkpoint::CheckpointFiles files =
        checkpoint::discover_checkpoint(newest("autoep_ep2_z3_ws2_fp32"), "");
    auto inputs = checkpoint::checkpoint_inputs(files);
    for (std::size_t i = 0; i < inputs.size(); ++i) {
        checkpoint::FileMeta meta =
            checkpoint::read_file_meta(inputs[i], static_cast<std::uint32_t>(i));
        WireWriter out;
        checkpoint::encode_file_meta(meta, out);
        WireReader in(out.bytes(), "test");
        checkpoint::FileMeta back = checkpoint::decode_file_meta(in);
        EXPECT_TRUE(back.info == meta.info) << inputs[i].path;
        EXPECT_TRUE(in.at_end());
    }
}

// --- ZeRO-1/2 expert groups and the router alias ------------------------------------------

TEST(AutoEpViews, ExpertPlacesOfDeepSpeedsGroups) {
    // E + D (the default): expert-parallel groups of consecutive ranks, so the ranks of one
    // expert-parallel rank are e, e + EP, ...; D + E: blocks of W / EP consecutive ranks.
    const std::uint32_t world = 8;
    for (std::uint32_t ep : {1u, 2u, 4u, 8u}) {
        for (std::uint32_t r = 0; r < world; ++r) {
            checkpoint::ExpertPlace ed = checkpoint::zero12_expert_place(r, world, ep, false);
            EXPECT_EQ(ed.ep_rank, r % ep);
            EXPECT_EQ(ed.edp_rank, r / ep);
            checkpoint::ExpertPlace de = checkpoint::zero12_expert_place(r, world, ep, true);
            EXPECT_EQ(de.ep_rank, r / (world / ep));
            EXPECT_EQ(de.edp_rank, r % (world / ep));
        }
    }
    // W = 4, EP = 2: rank 1 holds EP rank 1's experts first (E + D), EP rank 0's second (D + E).
    EXPECT_EQ(checkpoint::zero12_expert_place(1, 4, 2, false).ep_rank, 1u);
    EXPECT_EQ(checkpoint::zero12_expert_place(1, 4, 2, true).ep_rank, 0u);
    EXPECT_EQ(checkpoint::zero12_expert_place(2, 4, 2, true).ep_rank, 1u);
}

checkpoint::NamedTensor module_entry(const std::string& name, std::uint64_t rows) {
    return {name, checkpoint::TensorRef{0, DType::kF32, {rows, 4}, rows * 4, 64, rows * 16}};
}

TEST(AutoEpViews, RouterRegisteredTwiceIsATie) {
    checkpoint::AutoEpLayer layer;
    layer.module_path = "l.mlp";
    layer.expert_key_prefix = "l.mlp.experts";
    checkpoint::ModelStatesInfo model;
    model.param_shapes = std::vector<std::vector<checkpoint::NamedShape>>{
        {{"l.mlp.router.gate.weight", {3, 4}}, {"l.mlp.router.gate.bias", {3}}}};
    model.module_tensors = {
        module_entry("l.mlp.router.gate.weight", 3), module_entry("l.mlp.router.gate.bias", 3),
        module_entry("l.mlp.gate.gate.weight", 3),   module_entry("l.mlp.gate.gate.bias", 3),
        module_entry("l.mlp.shared.gate.weight", 3), module_entry("l.mlp.other.gate.weight", 5),
        module_entry("l.mlp.other.gate.bias", 3)};
    model.module_tensors[3].tensor.shape = {3};
    model.module_tensors[1].tensor.shape = {3};
    using Pairs = std::vector<std::pair<std::string, std::string>>;
    // 'gate' mirrors the router; 'shared' lacks the bias; 'other' has another shape.
    EXPECT_EQ(checkpoint::infer_router_aliases(model, {layer}),
              (Pairs{{"l.mlp.gate.gate.weight", "l.mlp.router.gate.weight"},
                     {"l.mlp.gate.gate.bias", "l.mlp.router.gate.bias"}}));
    // Named elsewhere already (a frozen parameter, a recorded tie): not inferred.
    model.frozen_param_shapes = std::vector<checkpoint::NamedShape>{{"l.mlp.gate.gate.bias", {3}}};
    EXPECT_TRUE(checkpoint::infer_router_aliases(model, {layer}).empty());
    // ZeRO-3 placeholders hold no shape: names decide.
    model.frozen_param_shapes.reset();
    for (auto& entry : model.module_tensors)
        entry.tensor = checkpoint::TensorRef{0, DType::kF32, {0}, 0, 0, 0};
    EXPECT_EQ(checkpoint::infer_router_aliases(model, {layer}).size(), 4u);  // 'other' too
}

checkpoint::ParallelCheckpointMeta parallel_meta(const std::string& fixture) {
    return checkpoint::read_parallel_checkpoint_meta(
        checkpoint::discover_file_grid(newest(fixture), ""));
}

checkpoint::CheckpointMeta data_parallel(const std::string& fixture) {
    return checkpoint::read_checkpoint_meta(checkpoint::discover_checkpoint(newest(fixture), ""));
}

// Rows e * local .. of a fused weight come from expert-parallel rank e's partitions, in the
// optimizer file of the rank that holds them.
void expect_fused_weights(const plan::PiecedPlan& pieced, const std::vector<std::string>& inputs,
                          const std::vector<std::string>& rank_files) {
    std::size_t fused = 0;
    for (const plan::PlannedTensor& tensor : pieced.plan.tensors) {
        if (!tensor.name.ends_with(".experts.w1") && !tensor.name.ends_with(".experts.w2") &&
            !tensor.name.ends_with(".experts.w3"))
            continue;
        ++fused;
        ASSERT_EQ(tensor.shape.front(), 4u) << tensor.name;
        ASSERT_EQ(tensor.pieces.size(), 2u) << tensor.name;
        const std::uint64_t half = tensor.source_bytes() / 2;
        for (std::size_t e = 0; e < 2; ++e) {
            const plan::TensorPiece& piece = tensor.pieces[e];
            EXPECT_EQ(piece.offset, e * half) << tensor.name;
            EXPECT_EQ(piece.row_bytes * piece.rows, half) << tensor.name;
            ASSERT_EQ(piece.sources.size(), 1u);
            for (const SourceExtent& extent : piece.sources.front())
                EXPECT_EQ(inputs.at(extent.file), rank_files.at(e)) << tensor.name;
        }
    }
    EXPECT_EQ(fused, 6u);
}

TEST(AutoEpPlan, FusedWeightsFromEachExpertParallelRank) {
    {
        const checkpoint::ParallelCheckpointMeta meta = parallel_meta("autoep_ep2_z1_ws2_fp32");
        plan::PiecedPlan pieced = plan::plan_parallel_consolidation(meta, {});
        expect_fused_weights(pieced, meta.inputs, meta.grid.optim_files.at(0));
        // After their layer's router, ties last.
        const auto& tensors = pieced.plan.tensors;
        EXPECT_EQ(tensors.at(5).name, "model.layers.0.mlp.router.gate.weight");
        EXPECT_EQ(tensors.at(6).name, "model.layers.0.mlp.experts.w1");
        EXPECT_EQ(tensors.back().name, "model.layers.1.mlp.gate.gate.weight");
        EXPECT_TRUE(tensors.back().is_alias());
        EXPECT_EQ(tensors.at(static_cast<std::size_t>(tensors.back().alias_of)).name,
                  "model.layers.1.mlp.router.gate.weight");
    }
    {
        const checkpoint::CheckpointMeta meta = data_parallel("autoep_ep2_z3_ws2_fp32");
        plan::PiecedPlan pieced =
            plan::plan_autoep_consolidation(checkpoint::autoep_views(meta), plan::PlanOptions{});
        expect_fused_weights(pieced, meta.inputs, meta.files.optim_files);
        EXPECT_EQ(pieced.plan.tensors.size(), 21u);
    }
}

TEST(AutoEpPlan, Zero3PartitionGroupsAreChecked) {
    const checkpoint::CheckpointMeta meta = data_parallel("autoep_ep2_z3_ws2_fp32");
    auto views_error = [](const checkpoint::CheckpointMeta& changed) {
        return input_error([&] { checkpoint::autoep_views(changed); });
    };
    {
        checkpoint::CheckpointMeta changed = meta;
        changed.optim[1].partition_groups.pop_back();
        EXPECT_NE(views_error(changed).find("ds_zero_partition_groups for 3 fp32_flat_groups"),
                  std::string::npos);
    }
    {
        // Both ranks claim EP rank 0: EP rank 1's experts are nowhere.
        checkpoint::CheckpointMeta changed = meta;
        for (auto& entry : changed.autoep_by_rank[1].layers)
            entry.ep_rank = 0;
        changed.optim[1].partition_groups[2].ranks = {0};
        const std::string message = views_error(changed);
        EXPECT_NE(message.find("partition rank"), std::string::npos) << message;
    }
    {
        checkpoint::CheckpointMeta changed = meta;
        changed.optim[0].partition_groups[2].count = 2;
        EXPECT_NE(views_error(changed).find("expert-data-parallel ranks"), std::string::npos);
    }
    {
        checkpoint::CheckpointMeta changed = meta;
        changed.optim[0].partition_groups[0].rank = 1;
        EXPECT_NE(views_error(changed).find("dense sub-group 0"), std::string::npos);
    }
    {
        checkpoint::CheckpointMeta changed = meta;
        changed.optim[1].partition_groups[2].ranks = {0};
        EXPECT_NE(views_error(changed).find("partition_ranks that are not the ranks [1]"),
                  std::string::npos);
    }
    {
        // A group holding experts and dense weights.
        checkpoint::CheckpointMeta changed = meta;
        (*changed.model.param_shapes)[2].push_back({"lm_head.bias", {11}});
        EXPECT_NE(views_error(changed).find("mixes fused AutoEP expert weights"),
                  std::string::npos);
    }
}

TEST(AutoEpPlan, Zero12ExpertFilesAreChecked) {
    const checkpoint::ParallelCheckpointMeta meta = parallel_meta("autoep_ep2_z1_ws2_fp32");
    {
        checkpoint::ParallelCheckpointMeta changed = meta;
        changed.experts.pop_back();
        EXPECT_NE(input_error([&] {
                      checkpoint::autoep_views(changed);
                  }).find("layer_1_expert_3_mp_rank_00_model_states.pt is missing"),
                  std::string::npos);
    }
    {
        checkpoint::ParallelCheckpointMeta changed = meta;
        changed.experts.front().state.tensors.front().tensor.shape = {16, 24};
        EXPECT_NE(input_error([&] {
                      checkpoint::autoep_views(changed);
                  }).find("another shape than one expert"),
                  std::string::npos);
    }
    {
        // The expert group partitioned over all ranks: no expert-data-parallel group.
        checkpoint::ParallelCheckpointMeta changed = meta;
        for (auto& optim : changed.ranks[0].optim)
            optim.states.partition_count = {2, 2};
        EXPECT_NE(input_error([&] {
                      checkpoint::autoep_views(changed);
                  }).find("expert group 1 is partitioned over 2 ranks, expected 1"),
                  std::string::npos);
    }
}

// --- AutoTP's tp x dp grid at ZeRO-3 ------------------------------------------------------

std::string grid_error(const std::vector<std::string>& names) {
    try {
        checkpoint::file_grid_from_names("/tag", names);
    } catch (const Error& error) {
        return error.what();
    }
    return "";
}

TEST(AutoTpZero3, TheFileGrid) {
    std::vector<std::string> names;
    for (int mp = 0; mp < 2; ++mp) {
        for (int dp = 0; dp < 3; ++dp) {
            const std::string place =
                "zero_pp_rank_" + std::to_string(dp) + "_mp_rank_0" + std::to_string(mp);
            names.push_back(place + "_model_states.pt");
            names.push_back("bf16_" + place + "_optim_states.pt");
        }
    }
    checkpoint::FileGrid grid = checkpoint::file_grid_from_names("/tag", names);
    EXPECT_TRUE(grid.is_zero3());
    EXPECT_EQ(grid.tp_degree, 2u);
    EXPECT_EQ(grid.dp_size(), 3u);
    EXPECT_EQ(grid.model_files.at(1), "/tag/zero_pp_rank_0_mp_rank_01_model_states.pt");
    EXPECT_EQ(grid.zero3_model_files.at(1).at(2), "/tag/zero_pp_rank_2_mp_rank_01_model_states.pt");
    EXPECT_EQ(checkpoint::parallel_inputs(grid).size(), 2u + 6u + 4u);

    auto without = [&](const std::string& name) {
        std::vector<std::string> fewer = names;
        std::erase(fewer, name);
        return grid_error(fewer);
    };
    EXPECT_NE(without("zero_pp_rank_1_mp_rank_01_model_states.pt")
                  .find("zero_pp_rank_1_mp_rank_01_model_states.pt is missing"),
              std::string::npos);
    EXPECT_NE(without("zero_pp_rank_2_mp_rank_01_model_states.pt").find("mp rank 01 has 2"),
              std::string::npos);
    EXPECT_NE(without("bf16_zero_pp_rank_2_mp_rank_00_optim_states.pt").find("optimizer files"),
              std::string::npos);
    std::vector<std::string> mixed = names;
    mixed.push_back("mp_rank_00_model_states.pt");
    EXPECT_NE(grid_error(mixed).find("holds both"), std::string::npos);
    std::vector<std::string> experts = names;
    experts.push_back("layer_0_expert_0_mp_rank_00_model_states.pt");
    EXPECT_NE(grid_error(experts).find("MoE expert files with ZeRO-3"), std::string::npos);
}

TEST(AutoTpZero3, TheFixtureMergesEachTpRanksZero3Partitions) {
    const checkpoint::ParallelCheckpointMeta meta = parallel_meta("autotp_tp2_z3_ws2_bf16");
    EXPECT_EQ(meta.tp_degree, 2u);
    EXPECT_EQ(meta.dp_degree, 1u);
    plan::PiecedPlan pieced = plan::plan_parallel_consolidation(meta, {});
    ASSERT_EQ(pieced.plan.tensors.size(), 33u);
    for (const plan::PlannedTensor& tensor : pieced.plan.tensors) {
        if (tensor.name == "model.layers.1.mlp.gate_up_proj.weight") {
            EXPECT_EQ(tensor.shape, (std::vector<std::uint64_t>{80, 32}));
            EXPECT_EQ(tensor.pieces.size(), 4u);  // 2 sub-parameters x 2 TP ranks
        }
        if (tensor.name == "lm_head.weight") {
            EXPECT_EQ(tensor.shape, (std::vector<std::uint64_t>{61, 32}));  // 31 + 30 rows
        }
    }
}

// --- the universal sub_param_shape object ------------------------------------------------

TEST(AutoTpUniversal, SubParamShapeAsDeepSpeedWritesIt) {
    const checkpoint::ParallelCheckpointMeta meta = parallel_meta("autotp_tp2_z1_ws2_fp32");
    plan::UniversalPlan universal = plan::plan_parallel_universal(meta, {});
    const std::string name = "model.layers.1.mlp.gate_up_proj.weight";
    const plan::UniversalParam* fused = nullptr;
    for (const plan::UniversalParam& param : universal.params) {
        if (param.name == name)
            fused = &param;
    }
    ASSERT_NE(fused, nullptr);
    ASSERT_EQ(fused->entries.size(), 1u);
    ASSERT_TRUE(fused->entries[0].object.has_value());
    EXPECT_EQ(fused->entries[0].key, "sub_param_shape");
    EXPECT_EQ(fused->entries[0].object->shape.at(0).values, (std::vector<std::int64_t>{40, 40}));
    // The file's pickle, byte for byte DeepSpeed's (its archive adds torch 2.6's own records).
    output::UniversalTensorFileOptions options;
    options.entries = fused->entries;
    options.requires_grad = true;
    const std::string path = "global_step2_universal/zero/" + name + "/fp32.pt";
    output::OutputFileLayout layout =
        output::layout_universal_tensor_file(path, universal.plan, fused->tensors[0], options);
    container::TorchFile theirs = container::TorchFile::open(newest("autotp_tp2_z1_ws2_fp32") +
                                                             "/ref/ds_to_universal/" + path);
    ASSERT_NE(theirs.zip(), nullptr);
    io::File file = io::File::open_read(theirs.path());
    const std::vector<std::byte> data_pkl =
        theirs.zip()->read_record(file, theirs.zip()->require("data.pkl"), std::uint64_t{1} << 20);
    bool found = false;
    for (const output::FixedRegion& region : layout.fixed) {
        const auto& bytes = region.bytes;
        found = found || std::search(bytes.begin(), bytes.end(), data_pkl.begin(),
                                     data_pkl.end()) != bytes.end();
    }
    EXPECT_TRUE(found) << "our data.pkl is not DeepSpeed's";

    // Before universal checkpoint version 0.4 a count of equal sub-parameters is written as
    // their sizes, in a tuple shape, as DeepSpeed's converter normalizes it.
    checkpoint::ParallelCheckpointMeta old = meta;
    for (auto& rank : old.ranks) {
        auto& info = *rank.model.extras.universal_info;
        info.version = 0.3;
        info.sub_params.front().shard_widths.clear();
        info.sub_params.front().shape.front() = {checkpoint::SubParamShapeDim::Kind::kInt, {2}};
        info.sub_params.front().sub_count = 2;
        info.sub_params.front().sub_sizes.clear();
    }
    plan::UniversalPlan normalized = plan::plan_parallel_universal(old, {});
    for (const plan::UniversalParam& param : normalized.params) {
        if (param.name != name)
            continue;
        const plan::SubParamShapeValue& value = *param.entries.at(0).object;
        EXPECT_TRUE(value.shape_is_tuple);
        EXPECT_EQ(value.shape.at(0).kind, checkpoint::SubParamShapeDim::Kind::kTuple);
        EXPECT_EQ(value.shape.at(0).values, (std::vector<std::int64_t>{40, 40}));
    }
}

}  // namespace
}  // namespace z2f
