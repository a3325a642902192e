// Where a universal checkpoint goes: the OUT_DIR-inside-the-checkpoint rule and its one
// exception (driver/destination/path_rules), and the output-directory checks on its folder tree
// (driver/destination/folders, driver/destination/inspection): beside the original nothing but
// <tag>_universal/ and latest_universal is looked at, created or removed.
#include <filesystem>
#include <map>

#include <gtest/gtest.h>

#include "checkpoint/assemble.hpp"
#include "checkpoint/discovery.hpp"
#include "driver/destination/folders.hpp"
#include "driver/destination/inspection.hpp"
#include "driver/destination/path_rules.hpp"
#include "driver/destination/run_record.hpp"
#include "run/run_plan.hpp"
#include "support/test_files.hpp"
#include "zero2fp32/error.hpp"

namespace z2f::driver {
namespace {

namespace fs = std::filesystem;

// Whether check_output_path lets `format` go to `out` (empty) or why not.
std::string path_error(const std::string& out, const std::string& arg, const std::string& tag,
                       const std::string& folder, OutputFormat format) {
    try {
        check_output_path({arg, tag, out, format, folder});
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kUsage);
        return e.what();
    }
    return "";
}

TEST(OutputPlacement, TheRuleAndItsUniversalException) {
    struct Case {
        const char* out;
        const char* arg;  // CKPT_DIR as given: the checkpoint folder or the tag folder
        bool universal_ok;
        bool hf_ok;
    };
    // Paths that do not exist are resolved as written: the rule is about the text.
    const std::string ckpt = "/c/ckpt";
    const std::string tag = "/c/ckpt/global_step2";
    for (const Case& c : {
             Case{"/c/ckpt", "/c/ckpt", true, false},
             Case{"/c/ckpt/out", "/c/ckpt", false, false},
             Case{"/c/ckpt/global_step2", "/c/ckpt", false, false},
             Case{"/c/ckpt/global_step2/x", "/c/ckpt", false, false},
             Case{"/c/ckpt", "/c/ckpt/global_step2", true, false},
             Case{"/c/ckpt/out", "/c/ckpt/global_step2", true, true},
             Case{"/c/ckpt/global_step2", "/c/ckpt/global_step2", false, false},
             Case{"/c/ckpt/global_step2/x", "/c/ckpt/global_step2", false, false},
             Case{"/c/ckpt2", "/c/ckpt", true, true},  // a prefix, not a parent
             Case{"/c", "/c/ckpt", true, true},
             Case{"/out", "/c/ckpt", true, true},
         }) {
        SCOPED_TRACE(std::string(c.out) + " from " + c.arg);
        EXPECT_EQ(path_error(c.out, c.arg, tag, ckpt, OutputFormat::kUniversal).empty(),
                  c.universal_ok);
        for (OutputFormat hf :
             {OutputFormat::kSafetensors, OutputFormat::kTorch, OutputFormat::kHdf5}) {
            EXPECT_EQ(path_error(c.out, c.arg, tag, ckpt, hf).empty(), c.hf_ok);
        }
    }
}

TEST(OutputPlacement, ARunBesideTheOriginalThroughALinkOrARelativePath) {
    testing::TempDir dir;
    testing::copy_tree(testing::fixture_path("z2_ws2_fp32"), dir.file("ckpt"));
    fs::create_directory_symlink(dir.file("ckpt"), dir.file("alias"));
    const checkpoint::CheckpointFiles files = checkpoint::discover_checkpoint(dir.file("ckpt"), "");
    auto error = [&](const std::string& out, const std::string& arg, OutputFormat format) {
        return path_error(out, arg, files.tag_dir, files.checkpoint_dir, format);
    };
    EXPECT_EQ(error(dir.file("alias"), dir.file("ckpt"), OutputFormat::kUniversal), "");
    EXPECT_NE(error(dir.file("alias"), dir.file("ckpt"), OutputFormat::kSafetensors), "");
    EXPECT_NE(error(dir.file("alias/global_step2"), dir.file("ckpt"), OutputFormat::kUniversal)
                  .find("inside the checkpoint"),
              std::string::npos);
    EXPECT_NE(error(dir.file("ckpt/sub/../new"), dir.file("ckpt"), OutputFormat::kUniversal), "");
    EXPECT_EQ(error(dir.file("elsewhere"), dir.file("ckpt"), OutputFormat::kUniversal), "");
    // CKPT_DIR the tag folder: its parent is the checkpoint folder.
    const checkpoint::CheckpointFiles tag =
        checkpoint::discover_checkpoint(dir.file("ckpt/global_step2"), "");
    EXPECT_EQ(path_error(dir.file("ckpt"), dir.file("ckpt/global_step2"), tag.tag_dir,
                         tag.checkpoint_dir, OutputFormat::kUniversal),
              "");
    EXPECT_NE(path_error(dir.file("ckpt/global_step2"), dir.file("ckpt/global_step2"), tag.tag_dir,
                         tag.checkpoint_dir, OutputFormat::kUniversal),
              "");
}

// The folder a refusal suggests ("e.g. '...'"), or "" when it suggests none.
std::string suggestion_in(const std::string& message) {
    const std::string marker = "e.g. '";
    const auto begin = message.find(marker);
    if (begin == std::string::npos)
        return "";
    const auto end = message.find('\'', begin + marker.size());
    return message.substr(begin + marker.size(), end - begin - marker.size());
}

TEST(OutputPlacement, RefusalsSuggestAFolderTheRulesAccept) {
    const std::string ckpt = "/c/ckpt";
    const std::string tag = "/c/ckpt/global_step2";
    struct Case {
        const char* out;
        const char* arg;
        const char* suggested;
        const char* says;
    };
    for (const Case& c : {
             // zero_to_fp32's habit from inside the checkpoint: `zero2fp32-mpi . pytorch_model.bin`
             Case{"/c/ckpt/pytorch_model.bin", "/c/ckpt", "/c/ckpt-hf", "looks like a file name"},
             Case{"/c/ckpt/global_step2/model.safetensors", "/c/ckpt/global_step2", "/c/ckpt-hf",
                  "looks like a file name"},
             Case{"/out/model.safetensors", "/c/ckpt", "/out/model", "looks like a file name"},
             // `zero2fp32-mpi ckpt/global_step2 ckpt`: the checkpoint's root
             Case{"/c/ckpt", "/c/ckpt/global_step2", "/c/model", "is the checkpoint's root"},
             Case{"/c/ckpt/global_step2/hf", "/c/ckpt/global_step2", "/c/ckpt-hf",
                  "inside the checkpoint folder"},
         }) {
        SCOPED_TRACE(std::string(c.out) + " from " + c.arg);
        for (OutputFormat hf : {OutputFormat::kSafetensors, OutputFormat::kTorch}) {
            const std::string error = path_error(c.out, c.arg, tag, ckpt, hf);
            EXPECT_NE(error.find(c.says), std::string::npos) << error;
            EXPECT_EQ(suggestion_in(error), c.suggested) << error;
            EXPECT_EQ(path_error(suggestion_in(error), c.arg, tag, ckpt, hf), "");
        }
    }
}

run::RunPlan universal_plan(const std::string& checkpoint) {
    run::RunSettings settings;
    settings.options.format = OutputFormat::kUniversal;
    settings.ranks = 2;
    return run::build_run_plan(
        checkpoint::read_checkpoint_meta(checkpoint::discover_checkpoint(checkpoint, "")),
        settings);
}

// Every regular file under `root`, relative, with its bytes.
std::map<std::string, std::vector<std::byte>> snapshot(const std::string& root) {
    std::map<std::string, std::vector<std::byte>> files;
    for (const auto& entry : fs::recursive_directory_iterator(root)) {
        if (entry.is_regular_file())
            files[fs::relative(entry.path(), root).string()] =
                testing::read_file_bytes(entry.path().string());
    }
    return files;
}

TEST(UniversalOutputDir, BesideTheOriginalOnlyItsOwnFolderIsPrepared) {
    testing::TempDir dir;
    const std::string ckpt = dir.file("ckpt");
    testing::copy_tree(testing::fixture_path("z3_ws2_fp32"), ckpt);
    testing::write_text_file(ckpt + "/config.json", "{}");
    const auto before = snapshot(ckpt);
    run::RunPlan plan = universal_plan(ckpt);
    OutputDirDecision decision = inspect_output_dir(plan, ckpt, OutputDirPolicy{});
    EXPECT_TRUE(decision.stale.empty());
    EXPECT_TRUE(decision.replaced.empty());
    prepare_output_dir(plan, ckpt, Options{}, decision);
    auto after = snapshot(ckpt);
    // The manifest is the one file added, in the universal folder; every folder of the plan
    // exists.
    ASSERT_EQ(after.size(), before.size() + 1);
    EXPECT_EQ(after.count("global_step2_universal/" + std::string(kManifestName)), 1u);
    after.erase("global_step2_universal/" + std::string(kManifestName));
    EXPECT_EQ(after, before);
    EXPECT_EQ(manifest_path(plan, ckpt),
              ckpt + "/global_step2_universal/" + std::string(kManifestName));
    for (const std::string& folder : output_subfolders(plan))
        EXPECT_TRUE(fs::is_directory(ckpt + "/" + folder)) << folder;
    EXPECT_EQ(output_subfolders(plan).front(), "global_step2_universal");
}

TEST(UniversalOutputDir, OtherFilesOfTheUniversalFolderAreStaleAndNothingElse) {
    testing::TempDir dir;
    const std::string out = dir.path();
    run::RunPlan plan = universal_plan(testing::fixture_path("z2_ws2_fp32"));
    // Another conversion's universal folder and latest_universal, an unrelated file, and in our
    // folder a parameter we do not plan, a temp file of ours and a link to a folder outside.
    fs::create_directories(dir.file("global_step1_universal/zero/a"));
    testing::write_text_file(dir.file("global_step1_universal/zero/a/fp32.pt"), "x");
    testing::write_text_file(dir.file("latest_universal"), "global_step1_universal");
    testing::write_text_file(dir.file("model.safetensors"), "x");
    fs::create_directories(dir.file("global_step2_universal/zero/old"));
    testing::write_text_file(dir.file("global_step2_universal/zero/old/fp32.pt"), "x");
    fs::create_directories(dir.file("global_step2_universal/zero/fc1.bias"));
    testing::write_text_file(dir.file("global_step2_universal/zero/fc1.bias/fp32.pt.tmp"), "");
    fs::create_directories(dir.file("keep/inner"));
    testing::write_text_file(dir.file("keep/inner/precious"), "x");
    fs::create_directory_symlink(dir.file("keep"), dir.file("global_step2_universal/zero/link"));

    EXPECT_EQ(unplanned_files_in_output_folder(plan, out),
              (std::vector<std::string>{"global_step2_universal/zero/link",
                                        "global_step2_universal/zero/old/fp32.pt"}));
    try {
        inspect_output_dir(plan, out, OutputDirPolicy{});
        ADD_FAILURE() << "mixed in another run's files";
    } catch (const Error& error) {
        EXPECT_NE(std::string(error.what()).find("zero/old/fp32.pt"), std::string::npos)
            << error.what();
    }
    OutputDirDecision decision = inspect_output_dir(plan, out, OutputDirPolicy{true, false, true});
    // latest_universal moves on at the end: neither a conflict nor removed before.
    EXPECT_TRUE(decision.replaced.empty());
    prepare_output_dir(plan, out, Options{}, decision);
    EXPECT_FALSE(fs::exists(dir.file("global_step2_universal/zero/old/fp32.pt")));
    EXPECT_FALSE(fs::exists(dir.file("global_step2_universal/zero/link")));
    EXPECT_FALSE(fs::exists(dir.file("global_step2_universal/zero/fc1.bias/fp32.pt.tmp")));
    EXPECT_TRUE(fs::exists(dir.file("keep/inner/precious")));
    EXPECT_TRUE(fs::exists(dir.file("global_step1_universal/zero/a/fp32.pt")));
    EXPECT_TRUE(fs::exists(dir.file("model.safetensors")));
    EXPECT_EQ(testing::read_file_bytes(dir.file("latest_universal")).size(),
              std::string("global_step1_universal").size());
}

TEST(UniversalOutputDir, AStaleFileWhereAFolderGoesIsReplacedByTheFolder) {
    testing::TempDir dir;
    run::RunPlan plan = universal_plan(testing::fixture_path("z2_ws2_fp32"));
    fs::create_directories(dir.file("global_step2_universal/zero"));
    testing::write_text_file(dir.file("global_step2_universal/zero/fc1.bias"), "x");
    OutputDirDecision decision =
        inspect_output_dir(plan, dir.path(), OutputDirPolicy{true, false, true});
    EXPECT_EQ(decision.stale, (std::vector<std::string>{"global_step2_universal/zero/fc1.bias"}));
    prepare_output_dir(plan, dir.path(), Options{}, decision);
    EXPECT_TRUE(fs::is_directory(dir.file("global_step2_universal/zero/fc1.bias")));
}

TEST(UniversalOutputDir, FilesOfThisRunAreConflictsUnlessOverwriteOrResume) {
    testing::TempDir dir;
    run::RunPlan plan = universal_plan(testing::fixture_path("z3_ws2_tied_fp32"));
    OutputDirDecision fresh = inspect_output_dir(plan, dir.path(), OutputDirPolicy{});
    prepare_output_dir(plan, dir.path(), Options{}, fresh);
    const run::OutputFileRecord& first = plan.files.front();
    std::vector<std::byte> header = first.layout.fixed.front().bytes;
    header.resize(first.layout.size);
    testing::write_file_bytes(dir.file(first.name()), header);  // size and header as planned
    testing::write_text_file(dir.file(plan.files.back().name()), "short");
    EXPECT_THROW(inspect_output_dir(plan, dir.path(), OutputDirPolicy{}), Error);
    OutputDirDecision overwrite =
        inspect_output_dir(plan, dir.path(), OutputDirPolicy{true, false, true});
    EXPECT_EQ(overwrite.replaced.size(), 2u);
    EXPECT_TRUE(overwrite.complete.empty());
    // --resume trusts the file the manifest (written by prepare) vouches for.
    OutputDirDecision resume =
        inspect_output_dir(plan, dir.path(), OutputDirPolicy{false, true, true});
    EXPECT_EQ(resume.complete, (std::vector<std::uint32_t>{0}));
    EXPECT_EQ(resume.replaced, (std::vector<std::string>{plan.files.back().name()}));
}

TEST(UniversalOutputDir, ATagFolderOfAnOrdinaryCheckpointIsNeverTheOutputFolder) {
    testing::TempDir dir;
    run::RunPlan plan = universal_plan(testing::fixture_path("z2_ws2_fp32"));
    testing::copy_tree(testing::fixture_path("z2_ws2_fp32/global_step2"),
                       dir.file("global_step2_universal"));
    for (bool overwrite : {false, true}) {
        try {
            inspect_output_dir(plan, dir.path(), OutputDirPolicy{overwrite, false, true});
            ADD_FAILURE() << "would write into a ZeRO tag folder";
        } catch (const Error& error) {
            EXPECT_EQ(error.kind(), ErrorKind::kOutput);
            EXPECT_NE(std::string(error.what()).find("tag folder of a ZeRO checkpoint"),
                      std::string::npos)
                << error.what();
        }
    }
}

}  // namespace
}  // namespace z2f::driver
