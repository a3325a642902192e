// Universal checkpoints end to end under MPI (docs/universal-checkpoint.md), in the same mpiexec
// as the other conversions: --format universal for every bundled ZeRO-1/2/3 fixture, each tree
// checked file by file against the checkpoint's own flat tensors, the engine's state dict and,
// where it exists, DeepSpeed's own ds_to_universal.py output; written beside the original;
// verified; and read back into safetensors that equal the engine's state dict. The tensor- and
// pipeline-parallel fixtures against their ds_to_universal.py outputs, verified, read back (ours
// and DeepSpeed's); MoE and ZeRO-0 refused. Outputs stay
// under $Z2F_MPI_OUTPUT_DIR, so mpi.identical_across_rank_counts compares them too.
#include <algorithm>
#include <filesystem>
#include <map>

#include <gtest/gtest.h>

#include "checkpoint/assemble.hpp"
#include "checkpoint/discovery.hpp"
#include "checkpoint/file_grid.hpp"
#include "checkpoint/parallel_assemble.hpp"
#include "mpi_support.hpp"
#include "support/expected_state.hpp"
#include "support/output_reader.hpp"
#include "support/test_files.hpp"
#include "support/universal_expectation.hpp"
#include "support/universal_reference.hpp"

namespace z2f {
namespace {

namespace fs = std::filesystem;
using mpi_test::barrier;
using mpi_test::fresh_output_dir;
using mpi_test::root;
using mpi_test::run_conversion;

// Every ZeRO-1/2/3 fixture of tests/data/deepspeed.
const char* kFixtures[] = {
    "z1_ws2_fp32",        "z2_ws1_fp32",      "z2_ws2_fp32",           "z2_ws2_bf16",
    "z2_ws2_frozen_bf16", "z2_ws2_tied_fp32", "z2_ws2_twogroups_fp32", "z2_ws2_multitag_fp32",
    "z3_ws1_fp32",        "z3_ws2_fp32",      "z3_ws2_bf16",           "z3_ws2_frozen_bf16",
    "z3_ws2_tied_fp32",   "z3_ws4_fp32",      "z3_ws2_fp32_torch2",    "z1_ws2_bf16opt",
};

const char* kStreamFiles[] = {"fp32.pt", "exp_avg.pt", "exp_avg_sq.pt"};

void universal(Options& options) {
    options.format = OutputFormat::kUniversal;
}

// Every file of the tree and its bytes, relative to `root`.
std::map<std::string, std::vector<std::byte>> snapshot(const std::string& dir) {
    std::map<std::string, std::vector<std::byte>> files;
    for (const std::string& name : testing::list_tree(dir))
        files[name] = testing::read_file_bytes(dir + "/" + name);
    return files;
}

// The universal checkpoint of `fixture` in `out`: exactly the planned files; each tensor file
// as the checkpoint's flat tensors give it; masters as the engine held them; the model-states
// files byte for byte; DeepSpeed's own reference byte for byte where it exists.
void expect_universal_tree(const std::string& fixture, const std::string& out) {
    SCOPED_TRACE(fixture);
    const checkpoint::CheckpointMeta meta = checkpoint::read_checkpoint_meta(
        checkpoint::discover_checkpoint(testing::fixture_path(fixture), ""));
    const bool stage3 = meta.layout == checkpoint::MasterLayout::kPerParam;
    const std::string folder = meta.files.tag + "_universal";
    const std::vector<testing::ExpectedUniversalParam> params =
        testing::expected_universal_params(meta);
    auto engine =
        testing::read_expected_state_dict(testing::fixture_path(fixture + "/expected.pt"));

    std::vector<std::string> planned = {"latest_universal", folder + "/zero/optimizer_state.pt"};
    for (const std::string& model : meta.files.model_files)
        planned.push_back(folder + "/" + fs::path(model).filename().string());
    for (const testing::ExpectedUniversalParam& param : params) {
        for (const char* stream : kStreamFiles)
            planned.push_back(folder + "/zero/" + param.name + "/" + stream);
        if (!stage3)
            planned.push_back(folder + "/zero/" + param.name + "/step.pt");
    }
    std::sort(planned.begin(), planned.end());
    EXPECT_EQ(testing::list_tree(out), planned);

    const std::vector<std::byte> latest = testing::read_file_bytes(out + "/latest_universal");
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(latest.data()), latest.size()), folder);
    for (const std::string& model : meta.files.model_files) {
        EXPECT_TRUE(testing::read_file_bytes(out + "/" + folder + "/" +
                                             fs::path(model).filename().string()) ==
                    testing::read_file_bytes(model))
            << model;
    }
    for (const testing::ExpectedUniversalParam& param : params) {
        for (std::size_t s = 0; s < 3; ++s) {
            const std::string path =
                out + "/" + folder + "/zero/" + param.name + "/" + kStreamFiles[s];
            SCOPED_TRACE(path);
            testing::UniversalTensorFile file = testing::read_universal_tensor_file(path);
            EXPECT_EQ(file.param_dict, !stage3);
            EXPECT_EQ(file.dtype, DType::kF32);
            EXPECT_EQ(file.shape, param.shape);
            EXPECT_EQ(file.requires_grad, s == 0);
            EXPECT_TRUE(file.bytes == param.streams[s]) << "differs from the checkpoint";
            if (s == 0) {
                const testing::ExpectedTensor* truth = testing::find_tensor(engine, param.name);
                ASSERT_NE(truth, nullptr);
                EXPECT_TRUE(file.bytes == truth->bytes) << "differs from the engine's master";
            }
        }
    }

    const std::string reference = testing::universal_root() + "/" + fixture;
    if (!fs::exists(reference))
        return;
    for (const std::string& name : testing::list_tree(reference)) {
        if (name == "NOTE")
            continue;
        EXPECT_NE(std::find(planned.begin(), planned.end(), name), planned.end()) << name;
        // ZeRO-3's optimizer_state.pt leaves out the partitions that the reference copies; its
        // content is compared in tests/unit/universal_layout_test.cpp.
        if (stage3 && name.ends_with("/optimizer_state.pt"))
            continue;
        EXPECT_TRUE(testing::read_file_bytes(out + "/" + name) ==
                    testing::read_file_bytes(reference + "/" + name))
            << name << " differs from ds_to_universal.py's";
    }
}

// safetensors `out` holds exactly the engine's state dict of `fixture`.
void expect_engine_state_dict(const std::string& fixture, const std::string& out) {
    SCOPED_TRACE(fixture + " -> " + out);
    auto expected =
        testing::read_expected_state_dict(testing::fixture_path(fixture + "/expected.pt"));
    auto content = testing::read_safetensors(out + "/model.safetensors");
    std::size_t aliases = 0;
    for (const auto& [key, value] : content.metadata)
        aliases += key != "format" ? 1u : 0u;
    EXPECT_EQ(content.tensors.size() + aliases, expected.size());
    for (const testing::ExpectedTensor& tensor : content.tensors) {
        const testing::ExpectedTensor* truth = testing::find_tensor(expected, tensor.name);
        ASSERT_NE(truth, nullptr) << tensor.name;
        EXPECT_EQ(tensor.dtype, truth->dtype) << tensor.name;
        EXPECT_EQ(tensor.shape, truth->shape) << tensor.name;
        EXPECT_TRUE(tensor.bytes == truth->bytes) << tensor.name;
    }
}

TEST(MpiUniversal, EveryFixtureFileByFileAndBackToTheEnginesStateDict) {
    for (const char* fixture : kFixtures) {
        const std::string out = fresh_output_dir(std::string("universal/") + fixture);
        mpi_test::Outcome converted =
            run_conversion(testing::fixture_path(fixture), out, universal);
        ASSERT_FALSE(converted.error) << fixture << ": " << converted.message;
        // --verify only reads, and learns how the output was written from its run record.
        mpi_test::Outcome verified = run_conversion(testing::fixture_path(fixture), out,
                                                    [](Options& o) { o.verify = true; });
        ASSERT_FALSE(verified.error) << fixture << ": " << verified.message;
        EXPECT_TRUE(verified.result.verified);
        // Universal input: CKPT_DIR holds latest_universal only.
        const std::string back = fresh_output_dir(std::string("universal_back/") + fixture);
        mpi_test::Outcome read_back = run_conversion(out, back);
        ASSERT_FALSE(read_back.error) << fixture << ": " << read_back.message;
        if (!root())
            continue;
        EXPECT_EQ(read_back.result.plan.tag.ends_with("_universal"), true);
        expect_universal_tree(fixture, out);
        expect_engine_state_dict(fixture, back);
    }
}

TEST(MpiUniversal, DeepSpeedsOwnUniversalCheckpointsGiveTheEnginesStateDict) {
    for (const std::string& fixture : testing::universal_fixtures()) {
        const std::string ckpt = fresh_output_dir("universal_reference_input/" + fixture);
        if (root())
            testing::assemble_universal_checkpoint(fixture, ckpt + "/ckpt");
        barrier();
        const std::string out = fresh_output_dir("universal_reference_input/" + fixture + "_st");
        mpi_test::Outcome outcome = run_conversion(ckpt + "/ckpt", out);
        ASSERT_FALSE(outcome.error) << fixture << ": " << outcome.message;
        if (root())
            expect_engine_state_dict(fixture, out);
    }
}

TEST(MpiUniversal, DirectAndBufferedWritesGiveTheSameBytes) {
    for (const char* fixture : {"z2_ws2_frozen_bf16", "z3_ws4_fp32"}) {
        std::map<IoBackend, std::string> outs;
        for (IoBackend io : {IoBackend::kDirect, IoBackend::kBuffered}) {
            outs[io] = fresh_output_dir(std::string("universal_io/") + fixture + "_" +
                                        std::string(enum_name(io)));
            mpi_test::Outcome outcome =
                run_conversion(testing::fixture_path(fixture), outs[io], [&](Options& o) {
                    universal(o);
                    o.io = io;
                    o.buffer_size = 64 << 10;  // many chunks per tensor
                });
            ASSERT_FALSE(outcome.error) << outcome.message;
        }
        if (root()) {
            EXPECT_EQ(testing::compare_trees(outs[IoBackend::kDirect], outs[IoBackend::kBuffered]),
                      "");
        }
    }
}

TEST(MpiUniversal, VerifyComparesEveryFile) {
    const std::string fixture = "z2_ws2_twogroups_fp32";
    const std::string out = fresh_output_dir("universal_verify/" + fixture);
    ASSERT_FALSE(run_conversion(testing::fixture_path(fixture), out, universal).error);
    auto verify = [&] {
        return run_conversion(testing::fixture_path(fixture), out, [](Options& o) {
            universal(o);
            o.verify = true;
        });
    };
    mpi_test::Outcome clean = verify();
    ASSERT_FALSE(clean.error) << clean.message;
    EXPECT_TRUE(clean.result.verify_only);
    EXPECT_TRUE(clean.result.verified);
    // One byte changed in a moment's data, in a step.pt, in optimizer_state.pt, in a byte copy
    // and in latest_universal: each is found, by name.
    for (const char* name :
         {"global_step2_universal/zero/fc1.weight/exp_avg_sq.pt",
          "global_step2_universal/zero/norm.bias/step.pt",
          "global_step2_universal/zero/optimizer_state.pt",
          "global_step2_universal/mp_rank_00_model_states.pt", "latest_universal"}) {
        const std::string path = out + "/" + name;
        std::vector<std::byte> original;
        if (root()) {
            original = testing::read_file_bytes(path);
            std::vector<std::byte> changed = original;
            // Past the zip header and the pickle: the stored data, or the text itself.
            changed[changed.size() * 3 / 4] ^= std::byte{0x01};
            testing::write_file_bytes(path, changed);
        }
        barrier();
        mpi_test::Outcome outcome = verify();
        EXPECT_EQ(outcome.error, std::optional<ErrorKind>(ErrorKind::kInput)) << name;
        EXPECT_NE(outcome.message.find(fs::path(name).filename().string()), std::string::npos)
            << name << ": " << outcome.message;
        if (root())
            testing::write_file_bytes(path, original);
        barrier();
    }
    EXPECT_FALSE(verify().error);
}

TEST(MpiUniversal, BesideTheOriginalNothingElseIsTouched) {
    const std::string fixture = "z3_ws2_frozen_bf16";
    const std::string base = fresh_output_dir("universal_beside");
    const std::string ckpt = base + "/ckpt";
    if (root()) {
        testing::copy_tree(testing::fixture_path(fixture), ckpt);
        testing::write_text_file(ckpt + "/config.json", "{}\n");
    }
    barrier();
    const auto before = root() ? snapshot(ckpt) : decltype(snapshot(ckpt)){};

    mpi_test::Outcome first = run_conversion(ckpt, ckpt, universal);
    ASSERT_FALSE(first.error) << first.message;
    if (root()) {
        auto after = snapshot(ckpt);
        for (const auto& [name, bytes] : before) {
            ASSERT_EQ(after.count(name), 1u) << name;
            EXPECT_TRUE(after.at(name) == bytes) << name << " was changed";
            after.erase(name);
        }
        // What remains is the universal checkpoint, and nothing but it.
        for (const auto& [name, bytes] : after) {
            EXPECT_TRUE(name == "latest_universal" || name.starts_with("global_step2_universal/"))
                << name;
        }
        const std::string alone = base + "/alone";
        fs::create_directories(alone);
        fs::copy(ckpt + "/global_step2_universal", alone + "/global_step2_universal",
                 fs::copy_options::recursive);
        fs::copy_file(ckpt + "/latest_universal", alone + "/latest_universal");
        expect_universal_tree(fixture, alone);
        fs::remove_all(alone);
    }

    // This run's names are a conflict without --overwrite; with it only they are replaced; from
    // the tag folder, its parent is the same place.
    mpi_test::Outcome again = run_conversion(ckpt, ckpt, universal);
    EXPECT_EQ(again.error, std::optional<ErrorKind>(ErrorKind::kOutput)) << again.message;
    mpi_test::Outcome from_tag = run_conversion(ckpt + "/global_step2", ckpt, [](Options& o) {
        universal(o);
        o.overwrite = true;
    });
    EXPECT_FALSE(from_tag.error) << from_tag.message;
    // Inside the checkpoint: usage errors, whatever the format.
    for (const std::string& inside : {ckpt + "/global_step2", ckpt + "/sub"}) {
        mpi_test::Outcome refused = run_conversion(ckpt, inside, universal);
        EXPECT_EQ(refused.error, std::optional<ErrorKind>(ErrorKind::kUsage)) << inside;
    }
    mpi_test::Outcome tag_folder =
        run_conversion(ckpt + "/global_step2", ckpt + "/global_step2", universal);
    EXPECT_EQ(tag_folder.error, std::optional<ErrorKind>(ErrorKind::kUsage));
    if (root()) {
        auto after = snapshot(ckpt);
        for (const auto& [name, bytes] : before)
            EXPECT_TRUE(after.at(name) == bytes) << name << " was changed";
        EXPECT_FALSE(fs::exists(ckpt + "/sub"));
    }

    // The folder now holds latest and latest_universal: `latest` wins unless asked otherwise.
    const std::string original = fresh_output_dir("universal_beside_st/original");
    const std::string converted = fresh_output_dir("universal_beside_st/universal");
    const std::string by_tag = fresh_output_dir("universal_beside_st/by_tag");
    mpi_test::Outcome plain = run_conversion(ckpt, original);
    mpi_test::Outcome asked =
        run_conversion(ckpt, converted, [](Options& o) { o.from_universal = true; });
    mpi_test::Outcome tagged =
        run_conversion(ckpt, by_tag, [](Options& o) { o.tag = "global_step2_universal"; });
    ASSERT_FALSE(plain.error || asked.error || tagged.error)
        << plain.message << asked.message << tagged.message;
    EXPECT_EQ(plain.result.plan.tag, "global_step2");
    EXPECT_EQ(asked.result.plan.tag, "global_step2_universal");
    EXPECT_EQ(tagged.result.plan.tag, "global_step2_universal");
    if (root()) {
        expect_engine_state_dict(fixture, original);
        expect_engine_state_dict(fixture, converted);
        EXPECT_EQ(testing::compare_trees(original, converted), "");
        EXPECT_EQ(testing::compare_trees(original, by_tag), "");
    }
}

// The tensor- and pipeline-parallel fixtures against DeepSpeed's own ds_to_universal.py output
// (ref/universal): the same files, each byte for byte except the vocabulary's tensor files,
// whose storage holds the real rows only here (their dict, shape, flags and values are equal);
// the masters equal the live engine's weights (the vocabulary stripped to its real rows).
void expect_parallel_universal_tree(const std::string& fixture, const std::string& out) {
    SCOPED_TRACE(fixture);
    const std::string reference = testing::parallel_universal_reference(fixture);
    const std::vector<std::string> names = testing::list_tree(reference);
    EXPECT_EQ(testing::list_tree(out), names);
    auto engine =
        testing::read_expected_state_dict(testing::parallel_fixture_dir(fixture) + "/expected.pt");
    const std::string vocab = "/language_model.embedding.word_embeddings.weight/";
    for (const std::string& name : names) {
        SCOPED_TRACE(name);
        const std::string ours = out + "/" + name;
        const std::string theirs = reference + "/" + name;
        const bool tensor_file = name.ends_with("/fp32.pt") || name.ends_with("/exp_avg.pt") ||
                                 name.ends_with("/exp_avg_sq.pt");
        if (!tensor_file || name.find(vocab) == std::string::npos) {
            EXPECT_TRUE(testing::read_file_bytes(ours) == testing::read_file_bytes(theirs))
                << "differs from ds_to_universal.py's";
        }
        if (!tensor_file)
            continue;
        const testing::UniversalTensorFile a = testing::read_universal_tensor_file(ours);
        const testing::UniversalTensorFile b = testing::read_universal_tensor_file(theirs);
        EXPECT_EQ(a.entries, b.entries);
        EXPECT_EQ(a.dtype, b.dtype);
        EXPECT_EQ(a.shape, b.shape);
        EXPECT_EQ(a.requires_grad, b.requires_grad);
        EXPECT_TRUE(a.bytes == b.bytes) << "values differ";
        EXPECT_EQ(a.storage_numel * 4, a.bytes.size());  // no padding stored
        if (name.ends_with("/fp32.pt")) {
            const std::string param = fs::path(name).parent_path().filename().string();
            const testing::ExpectedTensor* truth = testing::find_tensor(engine, param);
            ASSERT_NE(truth, nullptr) << param;
            ASSERT_LE(a.bytes.size(), truth->bytes.size());
            EXPECT_TRUE(std::equal(a.bytes.begin(), a.bytes.end(), truth->bytes.begin()))
                << "differs from the engine's master";
            EXPECT_EQ(a.bytes.size() == truth->bytes.size(), name.find(vocab) == std::string::npos);
        }
    }
}

// safetensors `out` holds the engine's weights of parallel `fixture`, the vocabulary without its
// padded rows (as every universal checkpoint keeps it).
void expect_stripped_engine_weights(const std::string& fixture, const std::string& out) {
    SCOPED_TRACE(fixture + " -> " + out);
    auto expected =
        testing::read_expected_state_dict(testing::parallel_fixture_dir(fixture) + "/expected.pt");
    auto content = testing::read_safetensors(out + "/model.safetensors");
    EXPECT_EQ(content.tensors.size(), expected.size());
    for (const testing::ExpectedTensor& truth : expected) {
        const testing::ExpectedTensor* tensor = testing::find_tensor(content.tensors, truth.name);
        ASSERT_NE(tensor, nullptr) << truth.name;
        std::vector<std::uint64_t> shape = truth.shape;
        if (truth.name == "language_model.embedding.word_embeddings.weight")
            shape[0] = 50;  // original_vocab_size
        EXPECT_EQ(tensor->shape, shape) << truth.name;
        ASSERT_LE(tensor->bytes.size(), truth.bytes.size()) << truth.name;
        EXPECT_TRUE(std::equal(tensor->bytes.begin(), tensor->bytes.end(), truth.bytes.begin()))
            << truth.name;
    }
}

TEST(MpiUniversal, TensorAndPipelineParallelFileByFileAgainstDeepSpeed) {
    for (const std::string& fixture : testing::parallel_universal_fixtures()) {
        const std::string ckpt = testing::parallel_fixture_dir(fixture);
        const std::string out = fresh_output_dir("universal_parallel/" + fixture);
        mpi_test::Outcome converted = run_conversion(ckpt, out, [](Options& o) {
            universal(o);
            o.buffer_size = 4096;  // the merged tensors cross buffer boundaries
        });
        ASSERT_FALSE(converted.error) << fixture << ": " << converted.message;
        mpi_test::Outcome verified = run_conversion(ckpt, out, [](Options& o) { o.verify = true; });
        ASSERT_FALSE(verified.error) << fixture << ": " << verified.message;
        EXPECT_TRUE(verified.result.verified);
        // Read back, ours and DeepSpeed's own: the engine's weights, the vocabulary stripped.
        const std::string back = fresh_output_dir("universal_parallel_back/" + fixture);
        mpi_test::Outcome read_back = run_conversion(out, back);
        ASSERT_FALSE(read_back.error) << fixture << ": " << read_back.message;
        const std::string theirs =
            fresh_output_dir("universal_parallel_reference_input/" + fixture);
        mpi_test::Outcome read_theirs =
            run_conversion(testing::parallel_universal_reference(fixture), theirs);
        ASSERT_FALSE(read_theirs.error) << fixture << ": " << read_theirs.message;
        if (root()) {
            // In the order of the original's own conversion (the engine's module order).
            std::vector<std::string> order;
            for (const ConversionPlan::Tensor& tensor : read_back.result.plan.tensors)
                order.push_back(tensor.name);
            std::vector<std::string> engine_order;
            for (const testing::ExpectedTensor& tensor : testing::read_expected_state_dict(
                     testing::parallel_fixture_dir(fixture) + "/expected.pt"))
                engine_order.push_back(tensor.name);
            EXPECT_EQ(order, engine_order);
            expect_parallel_universal_tree(fixture, out);
            expect_stripped_engine_weights(fixture, back);
            expect_stripped_engine_weights(fixture, theirs);
        }
    }
    // Averaged replicas (--tp-replicated average): masters and moments are the means of the
    // TP ranks' copies, bit-equal here, so the tree is the checked one's.
    {
        const std::string averaged = fresh_output_dir("universal_parallel_average/tp2");
        mpi_test::Outcome outcome = run_conversion(testing::parallel_fixture_dir("tp2_dp2_z1_fp32"),
                                                   averaged, [](Options& o) {
                                                       universal(o);
                                                       o.tp_replicated = TpReplicated::kAverage;
                                                       o.buffer_size = 4096;
                                                   });
        ASSERT_FALSE(outcome.error) << outcome.message;
        if (root()) {
            EXPECT_EQ(
                testing::compare_trees(
                    mpi_test::output_base() + "/universal_parallel/tp2_dp2_z1_fp32", averaged),
                "");
        }
    }
    // A TP-replicated parameter's moments are checked equal over the TP ranks like its
    // masters: one changed element of TP rank 1's copy is found before anything is written.
    const std::string fixture = "tp2_dp2_z1_fp32";
    const std::string ckpt = fresh_output_dir("universal_parallel_replica/ckpt");
    const std::string out = fresh_output_dir("universal_parallel_replica/out");
    if (root()) {
        testing::copy_tree(testing::parallel_fixture_dir(fixture) + "/global_step2",
                           ckpt + "/global_step2");
        testing::write_text_file(ckpt + "/latest", "global_step2");
        const checkpoint::ParallelCheckpointMeta meta = checkpoint::read_parallel_checkpoint_meta(
            checkpoint::discover_file_grid(ckpt, "global_step2"));
        const checkpoint::TensorRef& moment =
            *meta.ranks.at(1).optim.at(0).states.group_states.at(0).exp_avg_sq;
        // The flat group holds the vocabulary's 26 x 16 slice, then the replicated position
        // embedding.
        const std::string path = meta.inputs.at(moment.file);
        std::vector<std::byte> bytes = testing::read_file_bytes(path);
        bytes.at(moment.offset + 26 * 16 * 4 + 4 * 5) ^= std::byte{0x40};
        testing::write_file_bytes(path, bytes);
    }
    barrier();
    mpi_test::Outcome refused = run_conversion(ckpt, out, universal);
    EXPECT_EQ(refused.error, std::optional<ErrorKind>(ErrorKind::kInput)) << refused.message;
    EXPECT_NE(refused.message.find("position_embeddings.weight/exp_avg_sq"), std::string::npos)
        << refused.message;
    if (root()) {
        EXPECT_TRUE(fs::is_empty(out));
    }
}

TEST(MpiUniversal, MixtureOfExpertsAndZero0AreRefused) {
    const std::string parallel = std::string(Z2F_TEST_DATA) + "/deepspeed-parallel";
    for (const char* fixture : {"moe_ep2_dp2_z2_fp32", "pp2_dp1_z0_fp32"}) {
        const std::string out = fresh_output_dir(std::string("universal_refused/") + fixture);
        mpi_test::Outcome outcome = run_conversion(parallel + "/" + fixture, out, universal);
        EXPECT_EQ(outcome.error, std::optional<ErrorKind>(ErrorKind::kUnsupported))
            << fixture << ": " << outcome.message;
        if (root()) {
            EXPECT_TRUE(fs::is_empty(out)) << fixture;
        }
    }
}

}  // namespace
}  // namespace z2f
