// End-to-end conversions of tests/data/deepspeed-generated under MPI (CTest runs the binary with
// mpiexec -n 1 to 4): real DeepSpeed 0.19.6 checkpoints at degrees, world sizes and dtypes the
// newest fixtures do not have (AutoTP TP 2 x DP 2 and TP 4, AutoEP EP 2 x expert-DP 2 and EP 4,
// Ulysses SP 2 x DP 2 and SP 4, ZeRO-0 fp16 and bf16 masters, the legacy format at ZeRO-3, ...).
// Every folder is found on disk, so a checkpoint added there is tested without a line here:
// into every Hugging Face format bit for bit the engine's weights (expected.pt), verified; and
// where DeepSpeed's loader reads a universal checkpoint (every run with ZeRO partitions), the
// universal checkpoint written, verified and read back to the same weights.
#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "mpi_support.hpp"
#include "support/built_formats.hpp"
#include "support/expected_state.hpp"
#include "support/format_outputs.hpp"
#include "support/output_reader.hpp"
#include "support/test_files.hpp"

namespace z2f {
namespace {

namespace fs = std::filesystem;
using mpi_test::fresh_output_dir;
using mpi_test::root;
using mpi_test::run_conversion;

// Every checkpoint of the set, sorted: the same list, in the same order, on every rank.
std::vector<std::string> generated_checkpoints() {
    const std::string base = testing::fixture_path("../deepspeed-generated");
    std::vector<std::string> names;
    for (const fs::directory_entry& entry : fs::directory_iterator(base)) {
        if (fs::exists(entry.path() / "latest") && fs::exists(entry.path() / "expected.pt"))
            names.push_back(entry.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    return names;
}

std::string generated(const std::string& name) {
    return testing::fixture_path("../deepspeed-generated/" + name);
}

TEST(MpiGenerated, TheSetIsThere) {
    EXPECT_GE(generated_checkpoints().size(), 12u);
}

TEST(MpiGenerated, EveryCheckpointIsTheEnginesWeightsInEveryFormat) {
    for (const std::string& name : generated_checkpoints()) {
        const auto expected = testing::read_expected_state_dict(generated(name) + "/expected.pt");
        for (OutputFormat format : testing::built_hf_formats()) {
            SCOPED_TRACE(name + " " + std::string(enum_name(format)));
            const std::string out =
                fresh_output_dir("generated/" + name + "_" + std::string(enum_name(format)));
            const auto [converted, verified] =
                mpi_test::convert_sharded_and_verify(generated(name), out, format);
            ASSERT_FALSE(converted.error) << converted.message;
            ASSERT_FALSE(verified.error) << verified.message;
            EXPECT_TRUE(verified.result.verified);
            if (root()) {
                EXPECT_EQ(testing::state_dict_differences(
                              testing::read_format_outputs_with_aliases(out, format, expected),
                              expected, DType::kF32),
                          "");
            }
        }
    }
}

TEST(MpiGenerated, UniversalCheckpointsReadBackToTheEnginesWeights) {
    std::size_t written = 0;
    for (const std::string& name : generated_checkpoints()) {
        SCOPED_TRACE(name);
        const std::string out = fresh_output_dir("generated_universal/" + name);
        mpi_test::Outcome converted = run_conversion(
            generated(name), out, [](Options& o) { o.format = OutputFormat::kUniversal; });
        if (name.starts_with("z0_")) {
            // Without ZeRO partitions DeepSpeed's universal loader would resume untrained.
            ASSERT_TRUE(converted.error);
            EXPECT_NE(converted.message.find("ZeRO"), std::string::npos) << converted.message;
            continue;
        }
        ASSERT_FALSE(converted.error) << converted.message;
        ++written;
        mpi_test::Outcome verified =
            run_conversion(generated(name), out, [](Options& o) { o.verify = true; });
        ASSERT_FALSE(verified.error) << verified.message;
        EXPECT_TRUE(verified.result.verified);
        const std::string back = fresh_output_dir("generated_universal_back/" + name);
        mpi_test::Outcome read_back = run_conversion(out, back);
        if (name.starts_with("autotp_") && name.ends_with("_frozen")) {
            // A TP run's frozen parameters are TP slices in the model files only, and a universal
            // checkpoint keeps no merge rules for them (docs/universal-checkpoint.md, "As input").
            ASSERT_TRUE(read_back.error);
            EXPECT_NE(read_back.message.find("frozen parameters"), std::string::npos)
                << read_back.message;
            continue;
        }
        ASSERT_FALSE(read_back.error) << read_back.message;
        if (!root())
            continue;
        const auto expected = testing::read_expected_state_dict(generated(name) + "/expected.pt");
        EXPECT_EQ(testing::state_dict_differences(testing::read_format_outputs_with_aliases(
                                                      back, OutputFormat::kSafetensors, expected),
                                                  expected, DType::kF32),
                  "");
    }
    EXPECT_GE(written, 10u);
}

}  // namespace
}  // namespace z2f
