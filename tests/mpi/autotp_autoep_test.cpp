// DeepSpeed 0.19.6's AutoTP and AutoEP checkpoints (tests/data/deepspeed-newest) end to end
// under MPI, in the same mpiexec runs (1-4 ranks and alone) as the other conversions:
//   - every Hugging Face format the build writes equals the live engine's weights (expected.pt)
//     bit for bit, the tied router aliases included, and --verify finds every file intact;
//   - universal output equals DeepSpeed's own ds_to_universal.py output (ref/ds_to_universal)
//     record for record (torch 2.6's byteorder and serialization_id records aside), except the
//     two documented differences: ZeRO-3's optimizer_state.pt without the partitions, and the
//     model-states files, copied byte for byte where DeepSpeed re-saves AutoEP's; it is
//     verified and read back to the engine's weights, and so is DeepSpeed's own output.
// Outputs stay under $Z2F_MPI_OUTPUT_DIR, so mpi.identical_across_rank_counts compares them too.
#include <filesystem>
#include <map>

#include <gtest/gtest.h>

#include "container/zip_reader.hpp"
#include "io/posix_file.hpp"
#include "mpi_support.hpp"
#include "support/built_formats.hpp"
#include "support/expected_state.hpp"
#include "support/format_outputs.hpp"
#include "support/output_reader.hpp"
#include "support/test_files.hpp"
#include "support/universal_reference.hpp"

namespace z2f {
namespace {

namespace fs = std::filesystem;
using mpi_test::fresh_output_dir;
using mpi_test::root;
using mpi_test::run_conversion;
using testing::ExpectedTensor;

const char* kFixtures[] = {"autotp_tp2_z1_ws2_fp32", "autotp_tp2_z3_ws2_bf16",
                           "autoep_ep2_z1_ws2_fp32", "autoep_ep2_z3_ws2_fp32"};

std::string newest(const std::string& fixture) {
    return std::string(Z2F_TEST_DATA) + "/deepspeed-newest/" + fixture;
}

std::vector<ExpectedTensor> engine_weights(const std::string& fixture) {
    return testing::read_expected_state_dict(newest(fixture) + "/expected.pt");
}

std::vector<ExpectedTensor> read_outputs(const std::string& dir, OutputFormat format,
                                         const std::vector<ExpectedTensor>& expected) {
    return testing::read_format_outputs_with_aliases(dir, format, expected);
}

void expect_engine_weights(const std::vector<ExpectedTensor>& ours,
                           const std::vector<ExpectedTensor>& expected) {
    EXPECT_EQ(ours.size(), expected.size());
    for (const ExpectedTensor& truth : expected) {
        const ExpectedTensor* tensor = testing::find_tensor(ours, truth.name);
        ASSERT_NE(tensor, nullptr) << truth.name;
        EXPECT_EQ(tensor->dtype, truth.dtype) << truth.name;
        EXPECT_EQ(tensor->shape, truth.shape) << truth.name;
        EXPECT_TRUE(tensor->bytes == truth.bytes) << truth.name;
    }
}

TEST(MpiAutoTpAutoEp, EveryHuggingFaceFormatHoldsTheEnginesWeights) {
    for (const char* fixture : kFixtures) {
        const std::vector<ExpectedTensor> expected = engine_weights(fixture);
        for (OutputFormat format : testing::built_hf_formats()) {
            const std::string out = fresh_output_dir("newest/" + std::string(fixture) + "_" +
                                                     std::string(enum_name(format)));
            // Buffers smaller than the fused experts and merged slices.
            const auto [converted, verified] = mpi_test::convert_sharded_and_verify(
                newest(fixture), out, format, [](Options& o) { o.buffer_size = 4096; });
            ASSERT_FALSE(converted.error)
                << fixture << " " << enum_name(format) << ": " << converted.message;
            ASSERT_FALSE(verified.error) << fixture << ": " << verified.message;
            EXPECT_TRUE(verified.result.verified);
            if (!root())
                continue;
            SCOPED_TRACE(std::string(fixture) + " " + std::string(enum_name(format)));
            expect_engine_weights(read_outputs(out, format, expected), expected);
        }
    }
}

// The records of a torch zip archive, by name (the archive folder left out).
std::map<std::string, std::vector<std::byte>> archive_records(const std::string& path) {
    io::File file = io::File::open_read(path);
    container::TorchArchive archive = container::TorchArchive::open(file);
    std::map<std::string, std::vector<std::byte>> records;
    for (const container::ZipRecord& record : archive.records())
        records[record.name] = archive.read_record(file, record, std::uint64_t{1} << 30);
    return records;
}

// Records newer torch writes for itself: the byte order (absent means little-endian to every
// reader) and a per-file random serialization id.
bool torch_own_record(const std::string& name) {
    return name == "byteorder" || name == ".data/serialization_id" || name == ".format_version" ||
           name == ".storage_alignment";
}

void expect_like_deepspeed(const std::string& fixture, const std::string& out) {
    SCOPED_TRACE(fixture);
    const std::string reference = newest(fixture) + "/ref/ds_to_universal";
    const std::vector<std::string> names = testing::list_tree(reference);
    EXPECT_EQ(testing::list_tree(out), names);
    const std::vector<ExpectedTensor> engine = engine_weights(fixture);
    const bool stage3 = std::string(fixture).find("_z3_") != std::string::npos;
    for (const std::string& name : names) {
        SCOPED_TRACE(name);
        const std::string ours = out + "/" + name;
        const std::string theirs = reference + "/" + name;
        if (!name.ends_with(".pt")) {
            EXPECT_TRUE(testing::read_file_bytes(ours) == testing::read_file_bytes(theirs));
            continue;
        }
        if (name.ends_with("_model_states.pt")) {
            // A byte copy of the original (DeepSpeed re-saves AutoEP's with two
            // universal_checkpoint_info keys that no loader reads rewritten).
            EXPECT_TRUE(testing::read_file_bytes(ours) ==
                        testing::read_file_bytes(newest(fixture) + "/global_step2/" +
                                                 fs::path(name).filename().string()));
            continue;
        }
        if (stage3 && name.ends_with("/optimizer_state.pt"))
            continue;  // the partitions left out (docs/universal-checkpoint.md §8)
        std::map<std::string, std::vector<std::byte>> a = archive_records(ours);
        std::map<std::string, std::vector<std::byte>> b = archive_records(theirs);
        std::erase_if(b, [](const auto& record) { return torch_own_record(record.first); });
        EXPECT_EQ(a.size(), b.size());
        for (const auto& [record, bytes] : b) {
            auto it = a.find(record);
            ASSERT_NE(it, a.end()) << record;
            EXPECT_TRUE(it->second == bytes) << record << " differs from ds_to_universal.py's";
        }
        if (name.ends_with("/fp32.pt")) {
            const std::string param = fs::path(name).parent_path().filename().string();
            const ExpectedTensor* truth = testing::find_tensor(engine, param);
            ASSERT_NE(truth, nullptr) << param;
            EXPECT_TRUE(testing::read_universal_tensor_file(ours).bytes == truth->bytes)
                << "differs from the engine's master";
        }
    }
}

TEST(MpiAutoTpAutoEp, UniversalOutputIsDeepSpeedsAndReadsBack) {
    for (const char* fixture : kFixtures) {
        const std::string out = fresh_output_dir("newest_universal/" + std::string(fixture));
        mpi_test::Outcome converted = run_conversion(newest(fixture), out, [](Options& o) {
            o.format = OutputFormat::kUniversal;
            o.buffer_size = 4096;
        });
        ASSERT_FALSE(converted.error) << fixture << ": " << converted.message;
        mpi_test::Outcome verified =
            run_conversion(newest(fixture), out, [](Options& o) { o.verify = true; });
        ASSERT_FALSE(verified.error) << fixture << ": " << verified.message;
        EXPECT_TRUE(verified.result.verified);
        // Read back, ours and DeepSpeed's own: the engine's weights, ties included.
        const std::string back = fresh_output_dir("newest_universal_back/" + std::string(fixture));
        mpi_test::Outcome ours = run_conversion(out, back);
        ASSERT_FALSE(ours.error) << fixture << ": " << ours.message;
        const std::string theirs =
            fresh_output_dir("newest_universal_reference_input/" + std::string(fixture));
        mpi_test::Outcome reference =
            run_conversion(newest(fixture) + "/ref/ds_to_universal", theirs);
        ASSERT_FALSE(reference.error) << fixture << ": " << reference.message;
        if (!root())
            continue;
        expect_like_deepspeed(fixture, out);
        const std::vector<ExpectedTensor> expected = engine_weights(fixture);
        expect_engine_weights(read_outputs(back, OutputFormat::kSafetensors, expected), expected);
        expect_engine_weights(read_outputs(theirs, OutputFormat::kSafetensors, expected), expected);
    }
}

// --dry-run shows each layout's grid: its degrees and every file with its place in it.
TEST(MpiAutoTpAutoEp, DryRunShowsEachGrid) {
    struct Case {
        const char* fixture;
        std::uint32_t tp, dp, ep;
        std::size_t files;
        const char* role;  // a role of one of the files
    };
    const Case cases[] = {
        {"autotp_tp2_z1_ws2_fp32", 2, 1, 1, 4, "ZeRO partition, TP rank 1, DP rank 0"},
        {"autotp_tp2_z3_ws2_bf16", 2, 1, 1, 4, "ZeRO-3 partition, TP rank 1, DP rank 0"},
        {"autoep_ep2_z1_ws2_fp32", 1, 2, 2, 11, "expert 3, MoE layer 1"},
        {"autoep_ep2_z3_ws2_fp32", 1, 2, 2, 4, "ZeRO-3 partition, DP rank 1, EP rank 1"},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(c.fixture);
        const std::string out = fresh_output_dir("newest_dry_run_grid/" + std::string(c.fixture));
        mpi_test::Outcome planned =
            run_conversion(newest(c.fixture), out, [](Options& o) { o.dry_run = true; });
        ASSERT_FALSE(planned.error) << planned.message;
        EXPECT_FALSE(std::filesystem::exists(out + "/model.safetensors"));
        ASSERT_TRUE(planned.result.plan.parallel.has_value());
        const ConversionPlan::ParallelGrid& grid = *planned.result.plan.parallel;
        EXPECT_EQ(grid.tp, c.tp);
        EXPECT_EQ(grid.dp, c.dp);
        EXPECT_EQ(grid.ep, c.ep);
        EXPECT_TRUE(grid.zero);
        ASSERT_EQ(grid.files.size(), c.files);
        bool found = false;
        for (const ConversionPlan::ParallelGrid::File& file : grid.files)
            found = found || file.role.find(c.role) != std::string::npos;
        EXPECT_TRUE(found) << "no file is \"" << c.role << "\"";
    }
}

}  // namespace
}  // namespace z2f
