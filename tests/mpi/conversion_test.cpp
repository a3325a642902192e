// End-to-end conversions of the bundled real checkpoints under MPI. CTest runs this binary with
// mpiexec -n 1, 2, 3, 4 (and alone, without a launcher or MPI); every test is collective, rank 0
// checks. Outputs stay under $Z2F_MPI_OUTPUT_DIR so that a later test can compare them across rank
// counts.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <functional>

#include <gtest/gtest.h>
#include <mpi.h>

#include "checkpoint/assemble.hpp"
#include "checkpoint/discovery.hpp"
#include "cli/exit_code.hpp"
#include "container/torch_file.hpp"
#include "io/dtype_convert.hpp"
#include "mpi_support.hpp"
#include "run/run_plan.hpp"
#include "support/built_formats.hpp"
#include "support/expected_state.hpp"
#include "support/format_outputs.hpp"
#include "support/output_reader.hpp"
#include "support/test_files.hpp"
#include "zero2fp32/mpi.hpp"

namespace z2f {
namespace {

namespace fs = std::filesystem;
using testing::ExpectedTensor;

using mpi_test::barrier;
using mpi_test::output_base;
using mpi_test::rank;
using mpi_test::root;

// A fresh output directory for `name`, the same path on every rank (collective).
std::string output_dir(const std::string& name) {
    std::string path = output_base() + "/" + name;
    if (root()) {
        fs::remove_all(path);
        fs::create_directories(fs::path(path).parent_path());
    }
    barrier();
    return path;
}

using cli::ExitCode;

// Converts the checkpoint at `checkpoint` on MPI_COMM_WORLD (collective) and reports the exit
// code the command line would give.
ExitCode convert_at(const std::string& checkpoint, const std::string& out,
                    const std::function<void(Options&)>& tweak = {}) {
    Options options;
    if (tweak)
        tweak(options);
    try {
        z2f::convert(checkpoint, out, options, MPI_COMM_WORLD);
        return ExitCode::kOk;
    } catch (const Error& error) {
        return cli::exit_code_for(error.kind());
    }
}

ExitCode convert(const std::string& fixture, const std::string& out,
                 const std::function<void(Options&)>& tweak = {}) {
    return convert_at(testing::fixture_path(fixture), out, tweak);
}

void parity(Options& o) {
    o.cast_all_buffers = true;
    o.keep_frozen_dtype = true;
    o.stage1_frozen = Stage1Frozen::kSkip;
}

const char* kAllFixtures[] = {
    "z1_ws2_fp32",        "z2_ws1_fp32",           "z2_ws2_fp32",          "z2_ws2_bf16",
    "z2_ws2_frozen_bf16", "z2_ws2_twogroups_fp32", "z2_ws2_multitag_fp32", "z3_ws1_fp32",
    "z3_ws2_fp32",        "z3_ws2_bf16",           "z3_ws2_frozen_bf16",   "z3_ws2_tied_fp32",
    "z3_ws4_fp32",        "z3_ws2_fp32_torch2",    "z1_ws2_bf16opt",
};

void expect_same_bytes(const std::string& a, const std::string& b) {
    auto left = testing::read_file_bytes(a);
    auto right = testing::read_file_bytes(b);
    EXPECT_EQ(left.size(), right.size()) << a << " vs " << b;
    EXPECT_TRUE(left == right) << a << " differs from " << b;
}

TEST(MpiConversion, DefaultSafetensorsEqualTheEnginesStateDict) {
    for (const char* fixture : kAllFixtures) {
        std::string out = output_dir(std::string("defaults/") + fixture);
        ASSERT_EQ(convert(fixture, out), ExitCode::kOk) << fixture;
        if (!root())
            continue;
        SCOPED_TRACE(fixture);
        auto expected = testing::read_expected_state_dict(
            testing::fixture_path(std::string(fixture) + "/expected.pt"));
        auto content = testing::read_safetensors(out + "/model.safetensors");
        std::size_t aliases = 0;
        for (const auto& [key, value] : content.metadata)
            aliases += key != "format" ? 1u : 0u;
        EXPECT_EQ(content.tensors.size() + aliases, expected.size());
        for (const ExpectedTensor& tensor : content.tensors) {
            const ExpectedTensor* truth = testing::find_tensor(expected, tensor.name);
            ASSERT_NE(truth, nullptr) << tensor.name;
            EXPECT_EQ(tensor.dtype, truth->dtype) << tensor.name;
            EXPECT_EQ(tensor.shape, truth->shape) << tensor.name;
            EXPECT_TRUE(tensor.bytes == truth->bytes) << tensor.name;
        }
    }
}

TEST(MpiConversion, ParitySafetensorsAreByteIdenticalToZeroToFp32) {
    for (const char* fixture : {"z1_ws2_fp32", "z2_ws2_fp32", "z2_ws2_bf16", "z2_ws2_frozen_bf16",
                                "z3_ws2_fp32", "z3_ws4_fp32"}) {
        std::string out = output_dir(std::string("parity_safetensors/") + fixture);
        ASSERT_EQ(convert(fixture, out, parity), ExitCode::kOk) << fixture;
        if (root()) {
            expect_same_bytes(
                out + "/model.safetensors",
                testing::fixture_path(std::string(fixture) + "/ref/safetensors/model.safetensors"));
        }
    }
}

TEST(MpiConversion, DefaultsAreByteIdenticalWhereZeroToFp32HasNoQuirk) {
    // No buffers, no frozen parameters: the defaults are zero_to_fp32's output exactly.
    for (const char* fixture :
         {"z1_ws2_fp32", "z2_ws2_fp32", "z2_ws2_bf16", "z3_ws2_fp32", "z3_ws4_fp32"}) {
        std::string out = output_dir(std::string("defaults_identical/") + fixture);
        ASSERT_EQ(convert(fixture, out), ExitCode::kOk) << fixture;
        if (root()) {
            expect_same_bytes(
                out + "/model.safetensors",
                testing::fixture_path(std::string(fixture) + "/ref/safetensors/model.safetensors"));
        }
    }
}

TEST(MpiConversion, ShardedParityIsByteIdenticalIndexIncluded) {
    struct Case {
        const char* fixture;
        std::uint64_t shard;
    };
    for (Case c : {Case{"z3_ws4_fp32", 10'000}, Case{"z3_ws2_bf16", 5'000},
                   Case{"z3_ws2_frozen_bf16", 5'000}}) {
        std::string out = output_dir(std::string("sharded/") + c.fixture);
        ASSERT_EQ(convert(c.fixture, out,
                          [&](Options& o) {
                              parity(o);
                              o.max_shard_size = c.shard;
                          }),
                  ExitCode::kOk);
        if (root()) {
            std::string ref =
                testing::fixture_path(std::string(c.fixture) + "/ref/sharded_safetensors");
            EXPECT_EQ(testing::compare_trees(out, ref), "") << c.fixture;
        }
    }
}

void expect_torch_state_dict(const std::string& ours, const std::string& reference) {
    auto mine = testing::read_torch_state_dict(ours);
    auto truth = testing::read_torch_state_dict(reference);
    ASSERT_EQ(mine.size(), truth.size()) << ours;
    for (std::size_t i = 0; i < mine.size(); ++i) {
        EXPECT_EQ(mine[i].name, truth[i].name);
        EXPECT_EQ(mine[i].dtype, truth[i].dtype) << mine[i].name;
        EXPECT_EQ(mine[i].shape, truth[i].shape) << mine[i].name;
        EXPECT_TRUE(mine[i].bytes == truth[i].bytes) << mine[i].name;
    }
}

TEST(MpiConversion, TorchBinHoldsZeroToFp32sTensors) {
    for (const char* fixture : kAllFixtures) {
        if (std::string(fixture) == "z1_ws2_bf16opt")
            continue;  // zero_to_fp32 refuses it
        std::string out = output_dir(std::string("torch/") + fixture);
        ASSERT_EQ(convert(fixture, out,
                          [](Options& o) {
                              parity(o);
                              o.format = OutputFormat::kTorch;
                          }),
                  ExitCode::kOk);
        if (root()) {
            SCOPED_TRACE(fixture);
            expect_torch_state_dict(
                out + "/pytorch_model.bin",
                testing::fixture_path(std::string(fixture) + "/ref/bin/pytorch_model.bin"));
        }
    }
    // Sharded .bin: same shard names and index bytes; each shard holds the same tensors, but
    // one storage per tensor instead of zero_to_fp32's whole flat groups.
    std::string out = output_dir("torch_sharded/z2_ws2_fp32");
    ASSERT_EQ(convert("z2_ws2_fp32", out,
                      [](Options& o) {
                          parity(o);
                          o.format = OutputFormat::kTorch;
                          o.max_shard_size = 5'000;
                      }),
              ExitCode::kOk);
    if (root()) {
        std::string ref = testing::fixture_path("z2_ws2_fp32/ref/sharded_bin");
        EXPECT_EQ(testing::list_tree(out), testing::list_tree(ref));
        expect_same_bytes(out + "/pytorch_model.bin.index.json",
                          ref + "/pytorch_model.bin.index.json");
        for (const std::string& name : testing::list_tree(ref)) {
            if (name.ends_with(".bin"))
                expect_torch_state_dict(out + "/" + name, ref + "/" + name);
        }
    }
}

TEST(MpiConversion, TiedWeightsInEveryFormat) {
    const std::string fixture = "z3_ws2_tied_fp32";
    auto expected =
        testing::read_expected_state_dict(testing::fixture_path(fixture + "/expected.pt"));
    std::string st = output_dir("tied/safetensors");
    ASSERT_EQ(convert(fixture, st), ExitCode::kOk);
    std::string bin = output_dir("tied/torch");
    ASSERT_EQ(convert(fixture, bin, [](Options& o) { o.format = OutputFormat::kTorch; }),
              ExitCode::kOk);
    const bool hdf5 = output::hdf5_output_built_in();
    std::string h5 = output_dir("tied/hdf5");
    if (hdf5) {
        ASSERT_EQ(convert(fixture, h5, [](Options& o) { o.format = OutputFormat::kHdf5; }),
                  ExitCode::kOk);
    }
    std::string untied = output_dir("tied/untied");
    ASSERT_EQ(convert(fixture, untied, [](Options& o) { o.untie = true; }), ExitCode::kOk);
    if (!root())
        return;
    auto content = testing::read_safetensors(st + "/model.safetensors");
    EXPECT_EQ(content.metadata, (std::vector<std::pair<std::string, std::string>>{
                                    {"format", "pt"}, {"lm_head.weight", "embed.weight"}}));
    EXPECT_EQ(testing::find_tensor(content.tensors, "lm_head.weight"), nullptr);
    auto torch_dict = testing::read_torch_state_dict(bin + "/pytorch_model.bin");
    ASSERT_NE(testing::find_tensor(torch_dict, "lm_head.weight"), nullptr);
    EXPECT_TRUE(testing::find_tensor(torch_dict, "lm_head.weight")->bytes ==
                testing::find_tensor(expected, "lm_head.weight")->bytes);
    if (hdf5) {
        auto linked = testing::read_hdf5_dataset(h5 + "/model.h5", "lm_head.weight");
        EXPECT_TRUE(linked.bytes == testing::find_tensor(expected, "embed.weight")->bytes);
    }
    auto separate = testing::read_safetensors(untied + "/model.safetensors");
    ASSERT_NE(testing::find_tensor(separate.tensors, "lm_head.weight"), nullptr);
    EXPECT_TRUE(testing::find_tensor(separate.tensors, "lm_head.weight")->bytes ==
                testing::find_tensor(expected, "embed.weight")->bytes);
}

TEST(MpiConversion, Hdf5HoldsTheEnginesStateDict) {
    if (!output::hdf5_output_built_in()) {
        // A build without HDF5 refuses the format as a usage error, before writing anything.
        std::string out = output_dir("hdf5/refused");
        EXPECT_EQ(convert("z3_ws4_fp32", out, [](Options& o) { o.format = OutputFormat::kHdf5; }),
                  ExitCode::kUsage);
        EXPECT_FALSE(fs::exists(out + "/model.h5"));
        return;
    }
    for (const char* fixture : {"z2_ws2_frozen_bf16", "z3_ws4_fp32", "z1_ws2_bf16opt"}) {
        std::string out = output_dir(std::string("hdf5/") + fixture);
        ASSERT_EQ(convert(fixture, out, [](Options& o) { o.format = OutputFormat::kHdf5; }),
                  ExitCode::kOk);
        if (!root())
            continue;
        auto expected = testing::read_expected_state_dict(
            testing::fixture_path(std::string(fixture) + "/expected.pt"));
        for (const ExpectedTensor& truth : expected) {
            auto dataset = testing::read_hdf5_dataset(out + "/model.h5", truth.name);
            EXPECT_EQ(dataset.shape, truth.shape) << truth.name;
            EXPECT_TRUE(dataset.bytes == truth.bytes) << fixture << " " << truth.name;
        }
    }
}

TEST(MpiConversion, HalfPrecisionOutputsRoundTheFp32Masters) {
    for (DType option : {DType::kBF16, DType::kF16}) {
        DType dtype = option;
        std::string out = output_dir(std::string("half/") + std::string(safetensors_name(dtype)));
        ASSERT_EQ(convert("z3_ws2_frozen_bf16", out, [&](Options& o) { o.dtype = option; }),
                  ExitCode::kOk);
        if (!root())
            continue;
        auto expected = testing::read_expected_state_dict(
            testing::fixture_path("z3_ws2_frozen_bf16/expected.pt"));
        auto content = testing::read_safetensors(out + "/model.safetensors");
        ASSERT_EQ(content.tensors.size(), expected.size());
        for (const ExpectedTensor& tensor : content.tensors) {
            const ExpectedTensor* truth = testing::find_tensor(expected, tensor.name);
            ASSERT_NE(truth, nullptr);
            EXPECT_EQ(tensor.dtype, dtype);
            std::vector<std::byte> rounded(truth->bytes.size() / 2);
            io::convert_elements(DType::kF32, truth->bytes, dtype, rounded);
            EXPECT_TRUE(tensor.bytes == rounded) << tensor.name;
        }
    }
}

TEST(MpiConversion, IoPathsWriteIdenticalBytes) {
    // Direct and buffered writes, each reading both ways; sharded (several files, several
    // owners) and as one file cut into 4 KiB blocks that every rank writes parts of (slots cut
    // between ranks, a torch zip's tail patched by the lead), in fp32 and bf16 (conversions).
    struct Contender {
        const char* name;
        IoBackend io;
        ReadMode read = ReadMode::kAuto;
    };
    const Contender contenders[] = {
        {"direct_buffered", IoBackend::kDirect, ReadMode::kBuffered},
        {"direct_direct", IoBackend::kDirect, ReadMode::kDirect},
        {"buffered_buffered", IoBackend::kBuffered, ReadMode::kBuffered},
        {"buffered_direct", IoBackend::kBuffered, ReadMode::kDirect}};
    for (const char* fixture : {"z2_ws2_frozen_bf16", "z3_ws4_fp32", "z3_ws2_tied_fp32"}) {
        for (OutputFormat format : {OutputFormat::kSafetensors, OutputFormat::kTorch}) {
            for (bool one_file : {false, true}) {
                const DType dtype = one_file ? DType::kBF16 : DType::kF32;
                std::string name = std::string(fixture) +
                                   (format == OutputFormat::kTorch ? "_torch" : "_st") +
                                   (one_file ? "_one_file" : "");
                std::vector<std::string> outs;
                for (const Contender& contender : contenders) {
                    outs.push_back(output_dir("io/" + std::string(contender.name) + "_" + name));
                    ASSERT_EQ(convert(fixture, outs.back(),
                                      [&](Options& o) {
                                          o.io = contender.io;
                                          o.read_mode = contender.read;
                                          o.format = format;
                                          o.dtype = dtype;
                                          if (one_file) {
                                              o.max_shard_size.reset();
                                              o.block_size = 4096;
                                          } else {
                                              o.max_shard_size = 4'000;
                                          }
                                      }),
                              ExitCode::kOk)
                        << contender.name << " " << name;
                }
                if (root()) {
                    for (std::size_t c = 1; c < outs.size(); ++c)
                        EXPECT_EQ(testing::compare_trees(outs[0], outs[c]), "")
                            << contenders[c].name << " " << name;
                }
            }
        }
    }
}

TEST(MpiConversion, OneFileSharedByAllRanks) {
    // --max-shard-size none: a single file, cut at block multiples into ranges that every rank
    // writes.
    std::string safetensors_out;
    for (OutputFormat format : testing::built_hf_formats()) {
        std::string out = output_dir("single_file/" + std::to_string(static_cast<int>(format)));
        if (format == OutputFormat::kSafetensors)
            safetensors_out = out;
        ASSERT_EQ(convert("z3_ws4_fp32", out,
                          [&](Options& o) {
                              o.format = format;
                              o.max_shard_size.reset();
                              o.buffer_size = 64 << 10;
                              o.block_size = 4096;  // a small fixture: every rank writes
                          }),
                  ExitCode::kOk);
    }
    if (root()) {
        expect_same_bytes(safetensors_out + "/model.safetensors",
                          testing::fixture_path("z3_ws4_fp32/ref/safetensors/model.safetensors"));
    }
}

// Outside the trees compared across rank counts: what a failed run leaves depends on them.
std::string scratch_dir(const std::string& name) {
    std::string path = output_base() + "-scratch/" + name;
    if (root()) {
        fs::remove_all(path);
        fs::create_directories(fs::path(path).parent_path());
    }
    barrier();
    return path;
}

// A copy of `fixture` in which one bit of the record holding the first tensor that `pick`
// chooses (as a run of `options` plans it) is flipped; collective, rank 0 writes.
struct DamagedCopy {
    std::string path;
    std::string tensor;  // the tensor the flipped byte belongs to
};
DamagedCopy damaged_copy(const std::string& fixture, const Options& options,
                         const std::function<bool(const plan::PlannedTensor&)>& pick) {
    const std::string original = testing::fixture_path(fixture);
    run::RunSettings settings;
    settings.options = options;
    run::RunPlan plan = run::build_run_plan(
        checkpoint::read_checkpoint_meta(checkpoint::discover_checkpoint(original, "")), settings);
    auto chosen = std::find_if(plan.tensors.tensors.begin(), plan.tensors.tensors.end(),
                               [&](const plan::PlannedTensor& tensor) {
                                   return tensor.replicas.empty() &&
                                          !plan::source_extents(tensor).empty() && pick(tensor);
                               });
    if (chosen == plan.tensors.tensors.end())
        throw std::runtime_error("no such tensor in " + fixture);
    const SourceExtent extent = plan::source_extents(*chosen).back();
    DamagedCopy copy{scratch_dir("damaged/" + fixture), chosen->name};
    if (root()) {
        fs::copy(original, copy.path, fs::copy_options::recursive);
        std::string input = plan.tensors.inputs[extent.file].path;
        input = copy.path + input.substr(original.size());
        std::vector<std::byte> bytes = testing::read_file_bytes(input);
        bytes.at(extent.offset + extent.length / 2) ^= std::byte{0x10};
        testing::write_file_bytes(input, bytes);
    }
    barrier();
    return copy;
}

TEST(MpiConversion, AFlippedBitInAnyRecordReadIsCaught) {
    struct Case {
        const char* fixture;
        OutputFormat format;
        std::function<bool(const plan::PlannedTensor&)> pick;
        const char* what;
    };
    auto role = [](TensorRole wanted) {
        return [wanted](const plan::PlannedTensor& tensor) { return tensor.role == wanted; };
    };
    const Case cases[] = {
        {"z3_ws2_fp32", OutputFormat::kSafetensors, role(TensorRole::kTrainable),
         "an fp32 master partition"},
        {"z2_ws2_fp32", OutputFormat::kTorch, role(TensorRole::kTrainable), "a flat fp32 group"},
        {"z2_ws2_frozen_bf16", OutputFormat::kSafetensors, role(TensorRole::kFrozen),
         "a frozen parameter"},
        {"z3_ws2_frozen_bf16", OutputFormat::kHdf5, role(TensorRole::kFrozen),
         "a ZeRO-3 frozen fragment"},
        {"z3_ws2_tied_fp32", OutputFormat::kSafetensors, role(TensorRole::kBuffer), "a buffer"},
        {"z2_ws2_fp32", OutputFormat::kUniversal,
         [](const plan::PlannedTensor& tensor) {
             return tensor.name.find("exp_avg_sq") != std::string::npos;
         },
         "an Adam moment"},
    };
    for (const Case& c : cases) {
        if (c.format == OutputFormat::kHdf5 && !output::hdf5_output_built_in())
            continue;
        SCOPED_TRACE(std::string(c.fixture) + " " + std::string(enum_name(c.format)) + ": " +
                     c.what);
        auto shape = [&](Options& o) {
            o.format = c.format;
            if (c.format == OutputFormat::kUniversal || c.format == OutputFormat::kHdf5)
                o.max_shard_size.reset();
            else
                o.max_shard_size = 3'000;
        };
        Options options;
        shape(options);
        DamagedCopy copy = damaged_copy(c.fixture, options, c.pick);
        std::string out = scratch_dir("damaged-out/" + std::string(c.fixture));
        try {
            z2f::convert(copy.path, out, options, MPI_COMM_WORLD);
            ADD_FAILURE() << "converted a checkpoint with a damaged record of " << copy.tensor;
        } catch (const Error& error) {
            EXPECT_EQ(error.kind(), ErrorKind::kInput) << error.what();
            EXPECT_NE(std::string(error.what()).find("fails its CRC-32 check"), std::string::npos)
                << error.what();
            EXPECT_NE(std::string(error.what()).find(copy.path), std::string::npos) << error.what();
        }
        if (root()) {
            // No index, and no output holding the damaged tensor's bytes under a final name.
            EXPECT_FALSE(fs::exists(out + "/model.safetensors.index.json"));
            EXPECT_FALSE(fs::exists(out + "/latest_universal"));
            for (const auto& entry : fs::recursive_directory_iterator(out)) {
                if (entry.path().extension() != ".safetensors")
                    continue;
                auto content = testing::read_safetensors(entry.path().string());
                EXPECT_EQ(testing::find_tensor(content.tensors, copy.tensor), nullptr)
                    << entry.path();
            }
        }
        // The same damage with the check off converts (and gives wrong bytes).
        std::string unchecked = scratch_dir("damaged-unchecked/" + std::string(c.fixture));
        EXPECT_EQ(convert_at(copy.path, unchecked,
                             [&](Options& o) {
                                 shape(o);
                                 o.input_crc = false;
                             }),
                  ExitCode::kOk);
    }
}

TEST(MpiConversion, VerifyWithABufferNotAWholeNumberOfElements) {
    // --verify splits the buffer in three; 1000 / 3 bytes once left a tail no float fits in,
    // and the compare loop spun forever on zero-element chunks.
    for (DType dtype : {DType::kF32, DType::kBF16}) {
        for (const char* fixture : {"z2_ws2_frozen_bf16", "z3_ws4_fp32"}) {
            std::string out =
                output_dir("odd_buffer/" + std::string(dtype_name(dtype)) + "/" + fixture);
            ASSERT_EQ(convert(fixture, out, [&](Options& o) { o.dtype = dtype; }), ExitCode::kOk);
            // The options come from OUT_DIR's run record: the defaults here do not matter.
            ASSERT_EQ(convert(fixture, out,
                              [&](Options& o) {
                                  o.buffer_size = 1000;
                                  o.verify = true;
                              }),
                      ExitCode::kOk);
        }
    }
}

TEST(MpiConversion, VerifyOnlyReadsAndResumeOfAFinishedOutputKeepsEveryFile) {
    std::string out = output_dir("verify_resume");
    auto sharded = [](Options& o) {
        o.dtype = DType::kBF16;
        o.max_shard_size = 4'000;
    };
    ASSERT_EQ(convert("z3_ws4_fp32", out, sharded), ExitCode::kOk);
    auto listing = [&] {
        std::vector<std::string> entries;
        for (const auto& entry : fs::directory_iterator(out)) {
            entries.push_back(
                entry.path().filename().string() + " " +
                std::to_string(fs::file_size(entry.path())) + " " +
                std::to_string(fs::last_write_time(entry.path()).time_since_epoch().count()));
        }
        std::sort(entries.begin(), entries.end());
        return entries;
    };
    barrier();
    auto before = listing();
    ASSERT_EQ(convert("z3_ws4_fp32", out, [](Options& o) { o.verify = true; }), ExitCode::kOk);
    // A chosen option that contradicts the record is a usage error.
    ASSERT_EQ(convert("z3_ws4_fp32", out,
                      [](Options& o) {
                          o.verify = true;
                          o.chosen = {ShapeOption::kDtype};
                      }),
              ExitCode::kUsage);
    ASSERT_EQ(convert("z3_ws4_fp32", out,
                      [&](Options& o) {
                          sharded(o);
                          o.resume = true;
                      }),
              ExitCode::kOk);
    barrier();
    EXPECT_EQ(listing(), before);
}

// --- tensor-, pipeline- and expert-parallel checkpoints (tests/data/deepspeed-parallel) -------

const char* kParallelFixtures[] = {"tp2_dp2_z1_fp32", "pp2_dp2_z1_fp32", "pp2_dp1_z0_fp32",
                                   "moe_ep2_dp2_z2_fp32"};

std::string parallel_fixture(const std::string& name) {
    return "../deepspeed-parallel/" + name;
}

void expect_engine_weights(const std::vector<ExpectedTensor>& ours,
                           const std::vector<ExpectedTensor>& expected, DType dtype) {
    EXPECT_EQ(ours.size(), expected.size());
    for (const ExpectedTensor& truth : expected) {
        const ExpectedTensor* tensor = testing::find_tensor(ours, truth.name);
        ASSERT_NE(tensor, nullptr) << truth.name;
        EXPECT_EQ(tensor->shape, truth.shape) << truth.name;
        std::vector<std::byte> want = truth.bytes;
        if (dtype != DType::kF32) {
            want.resize(truth.bytes.size() / 4 * dtype_size(dtype));
            io::convert_elements(DType::kF32, truth.bytes, dtype, want);
        }
        EXPECT_TRUE(tensor->bytes == want) << truth.name;
    }
}

TEST(MpiConversion, ParallelCheckpointsEqualTheEnginesWeightsInEveryFormat) {
    for (const char* fixture : kParallelFixtures) {
        auto expected = testing::read_expected_state_dict(
            testing::fixture_path(parallel_fixture(fixture) + "/expected.pt"));
        for (OutputFormat format : testing::built_hf_formats()) {
            std::string out = output_dir("parallel/" + std::string(fixture) + "_" +
                                         std::string(enum_name(format)));
            ASSERT_EQ(convert(parallel_fixture(fixture), out,
                              [&](Options& o) {
                                  o.format = format;
                                  // Several files and owners, except HDF5 (read as one file).
                                  if (format == OutputFormat::kHdf5)
                                      o.max_shard_size.reset();
                                  else
                                      o.max_shard_size = 3'000;
                              }),
                      ExitCode::kOk)
                << fixture << " " << enum_name(format);
            // Read-only --verify of what was written: every byte against the checkpoint.
            ASSERT_EQ(convert(parallel_fixture(fixture), out, [](Options& o) { o.verify = true; }),
                      ExitCode::kOk)
                << fixture << " " << enum_name(format) << " --verify";
            if (!root())
                continue;
            SCOPED_TRACE(std::string(fixture) + " " + std::string(enum_name(format)));
            expect_engine_weights(testing::read_format_outputs(out, format, expected), expected,
                                  DType::kF32);
        }
    }
}

TEST(MpiConversion, ParallelCheckpointsInBf16) {
    for (const char* fixture : {"tp2_dp2_z1_fp32", "moe_ep2_dp2_z2_fp32"}) {
        auto expected = testing::read_expected_state_dict(
            testing::fixture_path(parallel_fixture(fixture) + "/expected.pt"));
        std::string out = output_dir("parallel_bf16/" + std::string(fixture));
        ASSERT_EQ(convert(parallel_fixture(fixture), out,
                          [](Options& o) {
                              o.dtype = DType::kBF16;
                              o.max_shard_size.reset();
                              o.buffer_size = 1000;  // tensors cross buffer boundaries
                          }),
                  ExitCode::kOk);
        if (root()) {
            SCOPED_TRACE(fixture);
            expect_engine_weights(
                testing::read_format_outputs(out, OutputFormat::kSafetensors, expected), expected,
                DType::kBF16);
        }
    }
}

TEST(MpiConversion, TensorParallelOptions) {
    const std::string fixture = parallel_fixture("tp2_dp2_z1_fp32");
    auto expected =
        testing::read_expected_state_dict(testing::fixture_path(fixture + "/expected.pt"));
    // TP rank 0's copies of the (bit-equal) replicas: the same bytes as checking them.
    std::string first = output_dir("parallel_options/first");
    ASSERT_EQ(convert(fixture, first, [](Options& o) { o.tp_replicated = TpReplicated::kFirst; }),
              ExitCode::kOk);
    // The padded vocabulary cut to original_vocab_size rows, as universal checkpoints keep it.
    std::string stripped = output_dir("parallel_options/strip_vocab");
    ASSERT_EQ(convert(fixture, stripped, [](Options& o) { o.strip_vocab_padding = true; }),
              ExitCode::kOk);
    // The mean of bit-equal replicas is the replica ((x + x) / 2 is exact): the engine's
    // weights again, written both ways and with a file cut between ranks (4 KiB blocks), and
    // --verify recomputes the means.
    std::vector<std::string> averaged;
    for (IoBackend io : {IoBackend::kDirect, IoBackend::kBuffered}) {
        averaged.push_back(output_dir("parallel_options/average_" + std::string(enum_name(io))));
        auto options = [&](Options& o) {
            o.tp_replicated = TpReplicated::kAverage;
            o.io = io;
            o.max_shard_size.reset();
            o.block_size = 4096;
        };
        ASSERT_EQ(convert(fixture, averaged.back(), options), ExitCode::kOk);
        ASSERT_EQ(convert(fixture, averaged.back(),
                          [&](Options& o) {
                              options(o);
                              o.verify = true;
                          }),
                  ExitCode::kOk);
    }
    if (!root())
        return;
    for (const std::string& out : averaged) {
        expect_engine_weights(
            testing::read_format_outputs(out, OutputFormat::kSafetensors, expected), expected,
            DType::kF32);
    }
    expect_engine_weights(testing::read_format_outputs(first, OutputFormat::kSafetensors, expected),
                          expected, DType::kF32);
    auto content = testing::read_safetensors(stripped + "/model.safetensors");
    const std::string vocab = "language_model.embedding.word_embeddings.weight";
    const ExpectedTensor* cut = testing::find_tensor(content.tensors, vocab);
    const ExpectedTensor* full = testing::find_tensor(expected, vocab);
    ASSERT_NE(cut, nullptr);
    EXPECT_EQ(cut->shape, (std::vector<std::uint64_t>{50, 16}));
    EXPECT_TRUE(std::equal(cut->bytes.begin(), cut->bytes.end(), full->bytes.begin()));
}

}  // namespace
}  // namespace z2f
