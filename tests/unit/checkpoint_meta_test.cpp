// Whole-checkpoint checks of assemble_checkpoint_meta, on hand-made file metadata.
#include <gtest/gtest.h>

#include "checkpoint/assemble.hpp"
#include "common/errors.hpp"

namespace z2f {
namespace {

struct Fake {
    checkpoint::CheckpointFiles files;
    std::vector<checkpoint::FileMeta> metas;
};

checkpoint::TensorRef partition(std::uint64_t numel) {
    return checkpoint::TensorRef{0, DType::kF32, {numel}, numel, 64, numel * 4};
}

Fake fake_stage2(std::uint32_t world) {
    Fake fake;
    fake.files.tag_dir = "/ckpt/global_step1";
    fake.files.model_files = {"/ckpt/global_step1/mp_rank_00_model_states.pt"};
    checkpoint::ModelStatesInfo model;
    model.has_buffer_names = true;
    model.param_shapes = std::vector<std::vector<checkpoint::NamedShape>>{{{"w", {8}}}};
    fake.metas.push_back({100, checkpoint::ModelFile{model, {}}, {}});
    for (std::uint32_t r = 0; r < world; ++r) {
        fake.files.optim_files.push_back("/ckpt/global_step1/zero_pp_rank_" + std::to_string(r) +
                                         "_mp_rank_00_optim_states.pt");
        checkpoint::OptimStatesInfo optim;
        optim.layout = checkpoint::MasterLayout::kFlatGroups;
        optim.zero_stage = 2;
        optim.partition_count = {world};
        optim.master = {partition(8 / world)};
        fake.metas.push_back({100, checkpoint::OptimFile{optim, {}}, {}});
    }
    return fake;
}

checkpoint::ModelStatesInfo& model_of(Fake& fake) {
    return std::get<checkpoint::ModelFile>(fake.metas[0].info).states;
}
checkpoint::OptimStatesInfo& optim_of(Fake& fake, std::size_t rank) {
    return std::get<checkpoint::OptimFile>(fake.metas[fake.files.model_files.size() + rank].info)
        .states;
}

std::string assemble_error(Fake fake, ErrorKind* kind = nullptr) {
    try {
        checkpoint::assemble_checkpoint_meta(fake.files, fake.metas);
    } catch (const Error& error) {
        if (kind != nullptr)
            *kind = error.kind();
        return error.what();
    }
    return "";
}

TEST(CheckpointMeta, AssemblesAStage2Checkpoint) {
    Fake fake = fake_stage2(2);
    model_of(fake).ds_version = "0.16.4";
    checkpoint::CheckpointMeta meta = checkpoint::assemble_checkpoint_meta(fake.files, fake.metas);
    EXPECT_EQ(meta.world_size, 2u);
    EXPECT_EQ(meta.zero_stage, 2);
    EXPECT_EQ(meta.inputs.size(), 3u);
    EXPECT_EQ(meta.ds_version, "0.16.4");
    EXPECT_TRUE(meta.notes.empty());
}

TEST(CheckpointMeta, WorldSizeMustMatchTheOptimizerFiles) {
    Fake fake = fake_stage2(2);
    for (std::size_t r = 0; r < 2; ++r)
        optim_of(fake, r).partition_count = {4};
    std::string message = assemble_error(fake);
    EXPECT_NE(message.find("expected 4 *_optim_states.pt files"), std::string::npos) << message;
    EXPECT_NE(message.find("found 2"), std::string::npos);
}

TEST(CheckpointMeta, ExpertGroupsAreRefused) {
    Fake fake = fake_stage2(2);
    for (std::size_t r = 0; r < 2; ++r) {
        optim_of(fake, r).partition_count = {2, 1};
        optim_of(fake, r).master.push_back(partition(4));
    }
    ErrorKind kind{};
    EXPECT_NE(assemble_error(fake, &kind).find("Mixture-of-Experts"), std::string::npos);
    EXPECT_EQ(kind, ErrorKind::kUnsupported);
}

TEST(CheckpointMeta, RanksMustAgree) {
    Fake fake = fake_stage2(2);
    optim_of(fake, 1).zero_stage = 1;
    EXPECT_NE(assemble_error(fake).find("does not match"), std::string::npos);
}

TEST(CheckpointMeta, RefusedLayouts) {
    ErrorKind kind{};
    Fake pipeline = fake_stage2(1);
    model_of(pipeline).module_is_none = true;
    EXPECT_NE(assemble_error(pipeline, &kind).find("'module' is None"), std::string::npos);
    EXPECT_EQ(kind, ErrorKind::kUnsupported);

    Fake tp = fake_stage2(1);
    model_of(tp).tp_degree = 2;
    EXPECT_NE(assemble_error(tp).find("tensor/pipeline-parallel"), std::string::npos);

    // AutoEP at ZeRO-1/2 is read through its expert files; without them the folder is short.
    Fake autoep = fake_stage2(1);
    checkpoint::AutoEpLayer layer;
    layer.module_path = "m";
    layer.expert_key_prefix = "m.experts";
    layer.num_experts = layer.num_local_experts = layer.ep_size = 1;
    model_of(autoep).autoep.layers = {layer};
    EXPECT_NE(assemble_error(autoep).find("no layer_<L>_expert_<E>"), std::string::npos);
    // The partition-native format needs ZeRO-3 partitions.
    model_of(autoep).autoep.layers.front().zero3_partitioned = true;
    EXPECT_NE(assemble_error(autoep).find("holds no ZeRO-3 partitions"), std::string::npos);

    Fake zero0 = fake_stage2(1);
    model_of(zero0).param_shapes.reset();
    EXPECT_NE(assemble_error(zero0).find("param_shapes is missing or None"), std::string::npos);

    Fake subgroups = fake_stage2(2);
    for (std::size_t r = 0; r < 2; ++r) {
        optim_of(subgroups, r).partition_groups = {checkpoint::ZeroPartitionGroup{2, 0, {}, {}},
                                                   checkpoint::ZeroPartitionGroup{1, 0, {}, {}}};
    }
    EXPECT_NE(assemble_error(subgroups).find("records no AutoEP layers"), std::string::npos);
}

TEST(CheckpointMeta, Stage3NeedsOneModelFilePerRank) {
    Fake fake = fake_stage2(2);
    for (std::size_t r = 0; r < 2; ++r) {
        optim_of(fake, r).layout = checkpoint::MasterLayout::kPerParam;
        optim_of(fake, r).zero_stage = 3;
        optim_of(fake, r).partition_count = {2};
    }
    EXPECT_NE(assemble_error(fake).find("single mp_rank_00_model_states.pt"), std::string::npos);
}

TEST(CheckpointMeta, OldLocationsAndNotes) {
    Fake fake = fake_stage2(2);
    auto shapes = model_of(fake).param_shapes;
    model_of(fake).param_shapes.reset();
    optim_of(fake, 0).param_shapes = shapes;  // DeepSpeed < 0.6
    model_of(fake).dp_world_size = 4;         // MiCS / hpZ
    model_of(fake).has_buffer_names = false;  // DeepSpeed < 0.4.2
    checkpoint::CheckpointMeta meta = checkpoint::assemble_checkpoint_meta(fake.files, fake.metas);
    EXPECT_TRUE(meta.model.param_shapes.has_value());
    EXPECT_EQ(meta.notes.size(), 3u);
}

TEST(CheckpointMeta, Bf16OptimizerIsStageOneWithPaddedPartitions) {
    Fake fake = fake_stage2(2);
    for (std::size_t r = 0; r < 2; ++r) {
        optim_of(fake, r).layout = checkpoint::MasterLayout::kPaddedGroups;
        optim_of(fake, r).zero_stage = -1;
    }
    checkpoint::CheckpointMeta meta = checkpoint::assemble_checkpoint_meta(fake.files, fake.metas);
    EXPECT_EQ(meta.zero_stage, 1);
    EXPECT_EQ(meta.layout, checkpoint::MasterLayout::kPaddedGroups);
}

}  // namespace
}  // namespace z2f
