// The universal checkpoint files, laid out from the original checkpoints' metadata and filled
// with the planned tensors, against DeepSpeed's own ds_to_universal.py output
// (tests/data/universal): byte for byte, except ZeRO-3's optimizer_state.pt (see below).
#include "output/universal_layout.hpp"

#include <algorithm>
#include <filesystem>
#include <set>

#include <gtest/gtest.h>

#include "checkpoint/assemble.hpp"
#include "checkpoint/discovery.hpp"
#include "common/crc32.hpp"
#include "output/torch_bin_layout.hpp"
#include "plan/universal_plan.hpp"
#include "support/materialize.hpp"
#include "support/pickle_inspect.hpp"
#include "support/test_files.hpp"
#include "support/universal_reference.hpp"
#include "support/zip_inspect.hpp"
#include "zero2fp32/error.hpp"

namespace z2f::output {
namespace {

namespace fs = std::filesystem;

struct Universal {
    checkpoint::CheckpointMeta meta;
    plan::UniversalPlan plan;
    std::vector<UniversalOutputFile> files;
};

Universal universal_of(const std::string& fixture) {
    Universal u;
    u.meta = checkpoint::read_checkpoint_meta(
        checkpoint::discover_checkpoint(testing::fixture_path(fixture), ""));
    u.plan = plan::plan_universal(u.meta);
    u.files = plan_universal_files(u.meta, u.plan);
    return u;
}

// The bytes the execute phase would write for a tensor file: fixed regions, the slot filled
// from the planned tensor, the tail built from the slot's CRC.
std::vector<std::byte> realize(const OutputFileLayout& layout, const plan::TensorPlan& plan) {
    std::vector<std::byte> bytes(layout.size);
    auto put = [&](std::uint64_t offset, const std::vector<std::byte>& data) {
        std::copy(data.begin(), data.end(), bytes.begin() + static_cast<std::ptrdiff_t>(offset));
    };
    for (const FixedRegion& region : layout.fixed) {
        put(region.offset, region.bytes);
    }
    std::vector<std::uint32_t> crcs;
    for (const TensorSlot& slot : layout.slots) {
        std::vector<std::byte> data = testing::materialize(plan, slot.tensor);
        EXPECT_EQ(data.size(), slot.length);
        put(slot.offset, data);
        crcs.push_back(crc32_of(data));
    }
    for (const FixedRegion& region : crc_tail(layout, crcs)) {
        put(region.offset, region.bytes);
    }
    return bytes;
}

bool is_stage3(const Universal& u) {
    return u.meta.layout == checkpoint::MasterLayout::kPerParam;
}

TEST(UniversalLayout, EveryFileOfEveryReferenceByteForByte) {
    std::size_t identical = 0;
    for (const std::string& fixture : testing::universal_fixtures()) {
        SCOPED_TRACE(fixture);
        Universal u = universal_of(fixture);
        const std::string root = testing::universal_root() + "/" + fixture;
        std::set<std::string> expected;
        for (const auto& entry : fs::recursive_directory_iterator(root)) {
            if (entry.is_regular_file() && entry.path().filename() != "NOTE") {
                expected.insert(fs::relative(entry.path(), root).string());
            }
        }
        std::set<std::string> produced;
        for (const UniversalOutputFile& file : u.files) {
            SCOPED_TRACE(file.path);
            if (file.kind == UniversalOutputFile::Kind::kCopy) {
                // tests/data/universal omits these byte copies of the model-states files.
                const std::string& source = u.meta.inputs.at(file.source);
                EXPECT_EQ(fs::path(file.path).filename(), fs::path(source).filename());
                EXPECT_EQ(file.size, fs::file_size(source));
                continue;
            }
            produced.insert(file.path);
            if (is_stage3(u) && file.path.ends_with("/optimizer_state.pt")) {
                continue;  // compared by content below
            }
            const std::vector<std::byte> reference =
                testing::read_file_bytes(root + "/" + file.path);
            const std::vector<std::byte> bytes = file.kind == UniversalOutputFile::Kind::kTensor
                                                     ? realize(file.layout, u.plan.plan)
                                                     : file.bytes;
            EXPECT_EQ(file.size, bytes.size());
            EXPECT_TRUE(bytes == reference) << "differs from the reference";
            identical += bytes == reference ? 1u : 0u;
        }
        EXPECT_EQ(produced, expected);
        EXPECT_EQ(u.files.back().path, "latest_universal");  // written last
    }
    // 7 references: 49 parameters x 3 tensor files, 40 step.pt (ZeRO-1/2), 7 latest_universal,
    // 5 ZeRO-1/2 optimizer_state.pt.
    EXPECT_EQ(identical, 49u * 3 + (49 - 16) + 7 + 5);
}

// ds_to_universal copies ZeRO-3's whole optimizer state, partitions and moments included (the
// reference's bytes cannot be ours: we leave them out). Everything else must be equal: the
// reference with fp32_flat_groups removed and each optimizer state entry reduced to its step.
TEST(UniversalLayout, Stage3OptimizerStateIsTheReferenceWithoutPartitions) {
    for (const char* fixture : {"z3_ws2_fp32", "z3_ws2_bf16"}) {
        SCOPED_TRACE(fixture);
        Universal u = universal_of(fixture);
        const auto it = std::find_if(u.files.begin(), u.files.end(), [](const auto& file) {
            return file.path.ends_with("/optimizer_state.pt");
        });
        ASSERT_NE(it, u.files.end());
        const std::vector<std::byte> reference =
            testing::read_file_bytes(testing::universal_root() + "/" + fixture + "/" + it->path);

        auto pickle_of = [](const std::vector<std::byte>& archive) {
            test::ZipArchiveInfo info =
                test::inspect_zip(test::bytes_source(archive), archive.size());
            test::check_crcs(test::bytes_source(archive), info);
            for (const test::ZipRecordInfo& record : info.records) {
                if (record.name.ends_with("/data.pkl")) {
                    return test::load_pickle(
                        std::span(archive).subspan(record.data_offset, record.size));
                }
            }
            throw std::runtime_error("no data.pkl");
        };
        test::PyRef expected = pickle_of(reference);
        test::PyRef ours = pickle_of(it->bytes);

        // Strip the reference: drop fp32_flat_groups, keep only 'step' in every state entry.
        auto& top = expected->items;
        for (std::size_t i = 0; i < top.size(); i += 2) {
            if (top[i]->text == "fp32_flat_groups") {
                top.erase(top.begin() + static_cast<std::ptrdiff_t>(i),
                          top.begin() + static_cast<std::ptrdiff_t>(i + 2));
                break;
            }
        }
        for (std::size_t i = 0; i < top.size(); i += 2) {
            if (top[i]->text != "optimizer_state_dict")
                continue;
            auto& inner = top[i + 1]->items;
            ASSERT_EQ(inner[0]->text, "state");
            for (std::size_t j = 1; j < inner[1]->items.size(); j += 2) {
                auto& entry = inner[1]->items[j]->items;
                std::vector<test::PyRef> kept;
                for (std::size_t k = 0; k < entry.size(); k += 2) {
                    if (entry[k]->text == "step") {
                        kept = {entry[k], entry[k + 1]};
                    }
                }
                entry = kept;
            }
        }
        EXPECT_EQ(test::repr(ours), test::repr(expected));
        EXPECT_NE(test::repr(ours).find("'step': torch._utils._rebuild_tensor_v2"),
                  std::string::npos)
            << test::repr(ours);
        EXPECT_LT(it->bytes.size(), reference.size() / 10);
    }
}

TEST(UniversalLayout, StepFilesOfOtherForms) {
    checkpoint::OptimizerStep step;
    step.form = checkpoint::OptimizerStep::Form::kInt;
    step.bits = 7;
    const std::vector<std::byte> bytes = universal_step_file(step);
    test::ZipArchiveInfo info = test::inspect_zip(test::bytes_source(bytes), bytes.size());
    ASSERT_EQ(info.records.size(), 2u);  // data.pkl, version: no storage
    EXPECT_EQ(info.records[0].name, "step/data.pkl");
    EXPECT_EQ(test::repr(test::load_pickle(
                  std::span(bytes).subspan(info.records[0].data_offset, info.records[0].size))),
              "7");
}

TEST(UniversalLayout, UnpicklableHyperParametersAreRefused) {
    Universal u = universal_of("z2_ws2_fp32");
    checkpoint::PickledGraph& graph = u.meta.optim[0].global_state.graph;
    // Turn the first param group's 'lr' into something that cannot be re-emitted.
    const checkpoint::PickledNode& groups = graph.at(*u.meta.optim[0].global_state.param_groups);
    const std::uint32_t lr = graph.at(groups.children[0]).children[1];
    graph.nodes[lr].kind = checkpoint::PickledNode::Kind::kUnsupported;
    graph.nodes[lr].text = "torch.Tensor at param_groups[0].lr";
    try {
        universal_optimizer_state_file(u.meta);
        ADD_FAILURE() << "re-emitted an unsupported value";
    } catch (const Error& error) {
        EXPECT_EQ(error.kind(), ErrorKind::kUnsupported);
        EXPECT_NE(std::string(error.what()).find("param_groups[0].lr"), std::string::npos)
            << error.what();
    }
}

// Rank 0 pads its flat groups when it is also the last rank (W = 1): the universal file has no
// padded groups and says zeros, as ds_to_universal.py writes them.
TEST(UniversalLayout, GroupPaddingsAreZeros) {
    Universal u = universal_of("z2_ws2_twogroups_fp32");
    const std::vector<std::byte> zeros = universal_optimizer_state_file(u.meta);
    checkpoint::OptimizerGlobalState& state = u.meta.optim[0].global_state;
    bool changed = false;
    for (const checkpoint::PickledEntry& entry : state.entries) {
        if (entry.key != "group_paddings")
            continue;
        for (std::uint32_t child : state.graph.at(entry.value_node).children) {
            state.graph.nodes.at(child).integer = 2;
            changed = true;
        }
    }
    ASSERT_TRUE(changed);
    EXPECT_TRUE(universal_optimizer_state_file(u.meta) == zeros);
}

TEST(UniversalLayout, LayoutsTileTheirFiles) {
    Universal u = universal_of("z2_ws2_twogroups_fp32");
    for (const UniversalOutputFile& file : u.files) {
        if (file.kind != UniversalOutputFile::Kind::kTensor)
            continue;
        SCOPED_TRACE(file.path);
        ASSERT_EQ(file.layout.slots.size(), 1u);
        EXPECT_TRUE(file.layout.has_crc_tail());
        const std::vector<std::byte> bytes = realize(file.layout, u.plan.plan);
        test::ZipArchiveInfo info = test::inspect_zip(test::bytes_source(bytes), bytes.size());
        test::check_crcs(test::bytes_source(bytes), info);
        EXPECT_EQ(info.records[1].data_offset, file.layout.slots[0].offset);
    }
}

}  // namespace
}  // namespace z2f::output
