// The run record a conversion leaves in OUT_DIR, the shaping options --verify and --resume take
// from it, what makes a record another run's, and the output path check. No MPI.
#include <filesystem>

#include <gtest/gtest.h>

#include "common/errors.hpp"
#include "common/name_list.hpp"
#include "driver/destination/path_rules.hpp"
#include "driver/destination/recorded_options.hpp"
#include "driver/destination/run_record.hpp"
#include "support/test_files.hpp"

namespace z2f {
namespace {

namespace fs = std::filesystem;
using driver::OutputPaths;

TEST(RunManifest, RoundTripsEveryShapingOption) {
    driver::RunManifest manifest;
    manifest.complete = true;
    manifest.tag_dir = "/ckpt/global_step9";
    manifest.tag = "global_step9";
    manifest.shape.format = OutputFormat::kTorch;
    manifest.shape.dtype = DType::kBF16;
    manifest.shape.max_shard_size.reset();
    manifest.shape.cast_all_buffers = true;
    manifest.shape.stage1_frozen = Stage1Frozen::kSkip;
    manifest.shape.include = {"a", "b"};
    manifest.shape.strip_prefixes = {"_orig_mod."};
    manifest.shape.hdf5_bf16 = Hdf5Bf16::kFloat;
    manifest.run_identity = "checkpoint=/ckpt\n";
    manifest.index_name = "pytorch_model.bin.index.json";
    manifest.files = {{"pytorch_model-00001-of-00002.bin", 10, 4, 7}};
    std::optional<driver::RunManifest> back = driver::decode_manifest(encode_manifest(manifest));
    ASSERT_TRUE(back);
    EXPECT_TRUE(back->complete);
    EXPECT_EQ(back->tag, "global_step9");
    EXPECT_EQ(back->index_name, manifest.index_name);
    EXPECT_EQ(back->files, manifest.files);
    for (const auto& [option, name] : EnumNames<ShapeOption>::kTable)
        EXPECT_EQ(driver::shape_value(back->shape, option),
                  driver::shape_value(manifest.shape, option))
            << name;
}

TEST(RunManifest, InputsRoundTripAndOldRecordsHaveNone) {
    driver::RunManifest manifest;
    manifest.inputs = {{"/ckpt/global_step9/a.pt", 1234}, {"/ckpt/global_step9/b.pt", 0}};
    std::string text = encode_manifest(manifest);
    std::optional<driver::RunManifest> back = driver::decode_manifest(text);
    ASSERT_TRUE(back);
    EXPECT_EQ(back->inputs, manifest.inputs);
    // Records of earlier versions have no "inputs": still records.
    const std::size_t from = text.find("\"inputs\"");
    const std::size_t to = text.find("\"options\"");
    ASSERT_NE(from, std::string::npos);
    text.erase(from, to - from);
    back = driver::decode_manifest(text);
    ASSERT_TRUE(back) << text;
    EXPECT_TRUE(back->inputs.empty());
}

TEST(RunManifest, DifferencesNameWhatMakesAnotherRun) {
    driver::RunManifest recorded;
    recorded.tag_dir = "/a/global_step2";
    recorded.inputs = {{"/a/global_step2/x.pt", 1000}, {"/a/global_step2/y.pt", 2000}};
    driver::RunManifest same = recorded;
    same.version = "another";  // the writer's version is not the run
    EXPECT_TRUE(driver::run_differences(recorded, same).empty());

    driver::RunManifest other = recorded;
    other.tag_dir = "/b/global_step2";
    other.shape.dtype = DType::kBF16;
    EXPECT_EQ(
        driver::run_differences(recorded, other),
        (std::vector<std::string>{"checkpoint: '/a/global_step2' recorded, '/b/global_step2' now",
                                  "--dtype: fp32 recorded, bf16 now"}));

    driver::RunManifest regrown = recorded;
    regrown.inputs = {{"/a/global_step2/x.pt", 1234567}, {"/a/global_step2/z.pt", 5}};
    EXPECT_EQ(driver::run_differences(recorded, regrown),
              (std::vector<std::string>{
                  "input '/a/global_step2/x.pt': 1,000 bytes recorded, 1,234,567 now",
                  "input '/a/global_step2/z.pt': not in the record",
                  "input '/a/global_step2/y.pt': recorded, not read now"}));

    driver::RunManifest old = recorded;  // a record without inputs: only the identity tells
    old.inputs.clear();
    EXPECT_TRUE(driver::run_differences(old, regrown).empty());
}

TEST(NameList, TheFirstFewThenHowManyMore) {
    EXPECT_EQ(listed_names({}), "");
    EXPECT_EQ(listed_names({"a"}), "a");
    EXPECT_EQ(listed_names({"a", "b", "c"}, 3), "a, b, c");
    std::vector<std::string> many(2120, "x");
    many[0] = "a";
    EXPECT_EQ(listed_names(many, 1), "a and 2,119 more");
    EXPECT_EQ(listed_names(many, 0).size(), 2120 * 3 - 2);  // all of them
}

TEST(RunManifest, ForeignOrDamagedTextIsNoRecord) {
    EXPECT_FALSE(driver::decode_manifest(""));
    EXPECT_FALSE(driver::decode_manifest("{\"tool\": \"other\"}"));
    driver::RunManifest manifest;
    std::string text = encode_manifest(manifest);
    text.replace(text.find("\"fp32\""), 6, "\"fp8\"");
    EXPECT_FALSE(driver::decode_manifest(text));
}

TEST(OutputShape, ChosenOptionsMustAgreeTheOthersAreTaken) {
    Options recorded;
    recorded.dtype = DType::kBF16;
    recorded.max_shard_size = 4'000;
    Options options;  // defaults: fp32, 5GB
    driver::adopt_recorded_shape(recorded, options, "out");
    EXPECT_EQ(options.dtype, DType::kBF16);
    EXPECT_EQ(options.max_shard_size, 4'000u);

    Options contradicting;
    contradicting.chosen = {ShapeOption::kDtype};
    try {
        driver::adopt_recorded_shape(recorded, contradicting, "out");
        FAIL();
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kUsage);
        EXPECT_NE(std::string(e.what()).find("--dtype fp32, but 'out' was written with bf16"),
                  std::string::npos)
            << e.what();
    }
}

class OutputPathTest : public ::testing::Test {
  protected:
    void SetUp() override {
        root_ = fs::canonical(temp_.path()).string();
        fs::create_directories(root_ + "/ckpt/global_step2");
        testing::write_text_file(root_ + "/file", "x");
        fs::create_directory_symlink(root_ + "/ckpt/global_step2", root_ + "/tag_link");
    }

    bool refused(const std::string& out, const std::string& checkpoint = "/ckpt") {
        try {
            driver::check_output_path({root_ + checkpoint, root_ + "/ckpt/global_step2", out,
                                       OutputFormat::kSafetensors, root_ + "/ckpt"});
        } catch (const Error& e) {
            EXPECT_EQ(e.kind(), ErrorKind::kUsage) << e.what();
            return true;
        }
        return false;
    }
    testing::TempDir temp_;
    std::string root_;
};

TEST_F(OutputPathTest, OutputInsideTheCheckpointIsRefused) {
    EXPECT_TRUE(refused(root_ + "/ckpt"));
    EXPECT_TRUE(refused(root_ + "/ckpt/new/deeper"));
    EXPECT_TRUE(refused(root_ + "/ckpt/global_step2"));
    EXPECT_TRUE(refused(root_ + "/ckpt/x/../global_step2/out"));
    EXPECT_TRUE(refused(root_ + "/tag_link/out"));
    EXPECT_TRUE(refused(root_ + "/ckpt/global_step2/out", "/ckpt/global_step2"));
    EXPECT_FALSE(refused(root_ + "/out"));
    EXPECT_FALSE(refused(root_ + "/ckpt2"));
    EXPECT_FALSE(refused(root_ + "/ckpt/../out"));
}

TEST_F(OutputPathTest, FilesAndFileNamesAreRefused) {
    EXPECT_TRUE(refused(""));
    EXPECT_TRUE(refused(root_ + "/file"));
    EXPECT_TRUE(refused(root_ + "/pytorch_model.bin"));
    EXPECT_TRUE(refused(root_ + "/model.safetensors"));
    EXPECT_TRUE(refused(root_ + "/weights.pt"));
    fs::create_directory(root_ + "/existing.bin");  // a folder of that name: the user's choice
    EXPECT_FALSE(refused(root_ + "/existing.bin"));
}

TEST(ResolvePath, FollowsLinksOfTheExistingPartOnly) {
    testing::TempDir temp;
    std::string root = temp.path();
    fs::create_directories(root + "/real/a");
    fs::create_directory_symlink(root + "/real", root + "/link");
    std::string real = fs::canonical(root + "/real").string();
    EXPECT_EQ(driver::resolve_path(root + "/link/a/new/../x"), real + "/a/x");
    EXPECT_EQ(driver::resolve_path(root + "/link/./a"), real + "/a");
}

}  // namespace
}  // namespace z2f
