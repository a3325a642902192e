// End-to-end conversions of the DeepSpeed 0.19.6 runs of tests/data/deepspeed-newest under MPI
// (CTest runs the binary with mpiexec -n 1 to 4): every fixture into every Hugging Face format,
// bit for bit the engine's weights (expected.pt), and verified; universal checkpoints where
// DeepSpeed's loader reads one, against ds_to_universal.py's tensors where it wrote them, and the
// refusals where it does not; the dry run's grid; the file names DeepSpeed 0.19.5 gave a
// sequence-parallel run.
#include <filesystem>

#include <gtest/gtest.h>

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
using mpi_test::barrier;
using mpi_test::fresh_output_dir;
using mpi_test::root;
using mpi_test::run_conversion;

std::string newest(const std::string& fixture) {
    return testing::fixture_path("../deepspeed-newest/" + fixture);
}

std::vector<testing::ExpectedTensor> engine_weights(const std::string& fixture) {
    return testing::read_expected_state_dict(newest(fixture) + "/expected.pt");
}

const char* kFixtures[] = {"z0_ws2_bf16",      "noser_z2_ws2_fp32", "ulysses_sp2_z2_ws2_fp32",
                           "muon_z1_ws2_fp32", "z3_ws3_bf16",       "lowp_z3_ws2_bf16"};

bool mentions(const std::vector<std::string>& lines, const std::string& text) {
    for (const std::string& line : lines) {
        if (line.find(text) != std::string::npos)
            return true;
    }
    return false;
}

TEST(MpiNewest, EveryFixtureIsTheEnginesWeightsInEveryFormat) {
    for (const char* fixture : kFixtures) {
        const auto expected = engine_weights(fixture);
        for (OutputFormat format : testing::built_hf_formats()) {
            SCOPED_TRACE(std::string(fixture) + " " + std::string(enum_name(format)));
            const std::string out = fresh_output_dir("newest/" + std::string(fixture) + "_" +
                                                     std::string(enum_name(format)));
            const auto [converted, verified] =
                mpi_test::convert_sharded_and_verify(newest(fixture), out, format);
            ASSERT_FALSE(converted.error) << converted.message;
            // Masters exist in every one of these runs: nothing may say they do not.
            EXPECT_FALSE(mentions(converted.result.warnings, "fp32 master"));
            ASSERT_FALSE(verified.error) << verified.message;
            EXPECT_TRUE(verified.result.verified);
            if (root()) {
                EXPECT_EQ(
                    testing::state_dict_differences(
                        testing::read_format_outputs(out, format, expected), expected, DType::kF32),
                    "");
            }
        }
    }
}

TEST(MpiNewest, SixteenBitOutputsRoundTheMasters) {
    // lowp's masters are bf16 themselves: --dtype bf16 gives back their exact bytes.
    for (const char* fixture : {"z0_ws2_bf16", "lowp_z3_ws2_bf16", "noser_z2_ws2_fp32"}) {
        SCOPED_TRACE(fixture);
        const std::string out = fresh_output_dir("newest_bf16/" + std::string(fixture));
        mpi_test::Outcome converted = run_conversion(newest(fixture), out, [](Options& o) {
            o.dtype = DType::kBF16;
            o.buffer_size = 1000;  // tensors cross buffer boundaries
        });
        ASSERT_FALSE(converted.error) << converted.message;
        if (root()) {
            const auto expected = engine_weights(fixture);
            EXPECT_EQ(testing::state_dict_differences(
                          testing::read_format_outputs(out, OutputFormat::kSafetensors, expected),
                          expected, DType::kBF16),
                      "");
        }
    }
}

TEST(MpiNewest, LegacyFormatInputsSayOnceThatTheyCarryNoCrc) {
    const std::string out = fresh_output_dir("newest_noser_crc");
    mpi_test::Outcome converted = run_conversion(newest("noser_z2_ws2_fp32"), out);
    ASSERT_FALSE(converted.error) << converted.message;
    std::size_t lines = 0;
    for (const std::string& warning : converted.result.warnings)
        lines += warning.find("legacy (non-zip) format") != std::string::npos ? 1u : 0u;
    if (root()) {
        EXPECT_EQ(lines, 1u);
    }
}

// The tensors of one universal parameter file: dtype, element count and bytes, widened to
// float32 when stored in 16 bits (DeepSpeed keeps lowp's masters in bf16; we write float32).
std::vector<std::byte> as_f32(const testing::UniversalTensorFile& file) {
    return testing::widen_to_f32(file.dtype, file.bytes);
}

std::uint64_t numel(const std::vector<std::uint64_t>& shape) {
    std::uint64_t n = 1;
    for (std::uint64_t d : shape)
        n *= d;
    return n;
}

TEST(MpiNewest, UniversalCheckpointsWhereDeepSpeedReadsThem) {
    for (const char* fixture :
         {"noser_z2_ws2_fp32", "ulysses_sp2_z2_ws2_fp32", "z3_ws3_bf16", "lowp_z3_ws2_bf16"}) {
        SCOPED_TRACE(fixture);
        const std::string out = fresh_output_dir("newest_universal/" + std::string(fixture));
        mpi_test::Outcome converted = run_conversion(
            newest(fixture), out, [](Options& o) { o.format = OutputFormat::kUniversal; });
        ASSERT_FALSE(converted.error) << converted.message;
        mpi_test::Outcome verified =
            run_conversion(newest(fixture), out, [](Options& o) { o.verify = true; });
        ASSERT_FALSE(verified.error) << verified.message;
        // Read back: the engine's weights again.
        const std::string back = fresh_output_dir("newest_universal_back/" + std::string(fixture));
        mpi_test::Outcome read_back = run_conversion(out, back);
        ASSERT_FALSE(read_back.error) << read_back.message;
        if (!root())
            continue;
        const auto expected = engine_weights(fixture);
        EXPECT_EQ(testing::state_dict_differences(
                      testing::read_format_outputs(back, OutputFormat::kSafetensors, expected),
                      expected, DType::kF32),
                  "");
        // Every tensor DeepSpeed's ds_to_universal.py wrote, value for value.
        const std::string reference = newest(fixture) + "/ref/ds_to_universal";
        if (!fs::exists(reference))
            continue;
        std::size_t compared = 0;
        for (const std::string& name : testing::list_tree(reference)) {
            if (!name.ends_with(".pt") || name.find("/zero/") == std::string::npos ||
                name.ends_with("optimizer_state.pt"))
                continue;
            SCOPED_TRACE(name);
            const auto theirs = testing::read_universal_tensor_file(reference + "/" + name);
            const auto ours = testing::read_universal_tensor_file(out + "/" + name);
            EXPECT_EQ(ours.param_dict, theirs.param_dict);
            EXPECT_EQ(numel(ours.shape), numel(theirs.shape));
            EXPECT_TRUE(as_f32(ours) == as_f32(theirs));
            ++compared;
        }
        EXPECT_GE(compared, 24u);
    }
}

TEST(MpiNewest, UniversalRefusesWhatNoLoaderReads) {
    // Muon keeps momentum_buffer, not Adam's moments; its weights still convert (above).
    const std::string muon = fresh_output_dir("newest_universal_refused/muon");
    mpi_test::Outcome refused = run_conversion(
        newest("muon_z1_ws2_fp32"), muon, [](Options& o) { o.format = OutputFormat::kUniversal; });
    ASSERT_TRUE(refused.error.has_value());
    EXPECT_EQ(*refused.error, ErrorKind::kUnsupported);
    EXPECT_NE(refused.message.find("momentum_buffer"), std::string::npos) << refused.message;
    EXPECT_NE(refused.message.find("exp_avg and exp_avg_sq"), std::string::npos) << refused.message;
    EXPECT_NE(refused.message.find("zero_pp_rank_0_mp_rank_00_optim_states.pt"), std::string::npos)
        << refused.message;
    // ZeRO-0: no ZeRO optimizer to load a universal checkpoint through.
    const std::string z0 = fresh_output_dir("newest_universal_refused/z0");
    refused = run_conversion(newest("z0_ws2_bf16"), z0,
                             [](Options& o) { o.format = OutputFormat::kUniversal; });
    ASSERT_TRUE(refused.error.has_value());
    EXPECT_EQ(*refused.error, ErrorKind::kUnsupported);
    EXPECT_NE(refused.message.find("ZeRO-0"), std::string::npos) << refused.message;
}

TEST(MpiNewest, DryRunShowsTheGrid) {
    const std::string out = fresh_output_dir("newest_dry_run");
    mpi_test::Outcome sp = run_conversion(newest("ulysses_sp2_z2_ws2_fp32"), out,
                                          [](Options& o) { o.dry_run = true; });
    ASSERT_FALSE(sp.error) << sp.message;
    ASSERT_TRUE(sp.result.plan.parallel.has_value());
    const ConversionPlan::ParallelGrid& grid = *sp.result.plan.parallel;
    EXPECT_EQ(grid.sp, 2u);
    EXPECT_EQ(grid.dp, 1u);
    EXPECT_EQ(grid.tp, 1u);
    ASSERT_EQ(grid.files.size(), 3u);
    EXPECT_NE(grid.files[2].role.find("ZeRO rank 1 (SP rank 1, DP rank 0)"), std::string::npos)
        << grid.files[2].role;

    mpi_test::Outcome z0 =
        run_conversion(newest("z0_ws2_bf16"), out, [](Options& o) { o.dry_run = true; });
    ASSERT_FALSE(z0.error) << z0.message;
    ASSERT_TRUE(z0.result.plan.parallel.has_value());
    EXPECT_FALSE(z0.result.plan.parallel->zero);
    EXPECT_EQ(z0.result.plan.parallel->files.size(), 1u);
}

TEST(MpiNewest, SequenceParallelFilesNamedByDeepSpeed019_5) {
    // The same run as DeepSpeed 0.19.5 named it: rank 1's optimizer file under SP rank 01.
    const std::string copy = fresh_output_dir("newest_sp_old_names");
    if (root()) {
        testing::copy_tree(newest("ulysses_sp2_z2_ws2_fp32"), copy + "/ckpt");
        fs::rename(copy + "/ckpt/global_step2/zero_pp_rank_1_mp_rank_00_optim_states.pt",
                   copy + "/ckpt/global_step2/zero_pp_rank_1_mp_rank_01_optim_states.pt");
    }
    barrier();
    const std::string out = fresh_output_dir("newest_sp_old_names_out");
    mpi_test::Outcome converted = run_conversion(copy + "/ckpt", out);
    ASSERT_FALSE(converted.error) << converted.message;
    if (root()) {
        const auto expected = engine_weights("ulysses_sp2_z2_ws2_fp32");
        EXPECT_EQ(testing::state_dict_differences(
                      testing::read_format_outputs(out, OutputFormat::kSafetensors, expected),
                      expected, DType::kF32),
                  "");
    }
}

}  // namespace
}  // namespace z2f
