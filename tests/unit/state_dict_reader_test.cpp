// The in-memory reader (zero2fp32/state_dict.hpp) on the bundled real checkpoints: every tensor
// bit-exact to the live engine's (expected.pt) with the converter's defaults and to DeepSpeed's
// own zero_to_fp32 output (ref/bin) with the parity options; the same bytes whatever the number
// of threads, the cuts between them, the read mode and the order of the reads; the input CRC
// check reported by the read that completes a damaged record; destinations refused when they
// do not fit.
#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/dtype.hpp"
#include "io/dtype_convert.hpp"
#include "io/posix_file.hpp"
#include "run/plan_in_process.hpp"
#include "support/expected_state.hpp"
#include "support/test_files.hpp"
#include "zero2fp32/error.hpp"
#include "zero2fp32/state_dict.hpp"

namespace z2f {
namespace {

using testing::ExpectedTensor;

const char* kFixtures[] = {
    "z1_ws2_bf16opt",        "z1_ws2_fp32",        "z2_ws1_fp32",          "z2_ws2_bf16",
    "z2_ws2_fp32",           "z2_ws2_frozen_bf16", "z2_ws2_multitag_fp32", "z2_ws2_tied_fp32",
    "z2_ws2_twogroups_fp32", "z3_ws1_fp32",        "z3_ws2_bf16",          "z3_ws2_fp32",
    "z3_ws2_fp32_torch2",    "z3_ws2_frozen_bf16", "z3_ws2_tied_fp32",     "z3_ws4_fp32",
};

// Every tensor with data of its own, read by `reader` (each in its own memory); aliases
// without data of their own hold their owner's bytes.
std::map<std::string, std::vector<std::byte>> read_all(StateDictReader& reader) {
    const ConversionPlan& plan = reader.plan();
    std::vector<std::vector<std::byte>> memory(plan.tensors.size());
    std::vector<TensorDestination> destinations;
    for (std::size_t i = 0; i < plan.tensors.size(); ++i) {
        std::uint64_t numel = 1;
        for (std::uint64_t d : plan.tensors[i].shape)
            numel *= d;
        memory[i].assign(numel * dtype_size(plan.tensors[i].dtype), std::byte{0xAB});
        if (reader.has_data(i))
            destinations.push_back({i, memory[i]});
    }
    reader.read(destinations);
    std::map<std::string, std::vector<std::byte>> bytes;
    std::map<std::string, std::size_t> index;
    for (std::size_t i = 0; i < plan.tensors.size(); ++i)
        index[plan.tensors[i].name] = i;
    for (std::size_t i = 0; i < plan.tensors.size(); ++i) {
        const ConversionPlan::Tensor& tensor = plan.tensors[i];
        const bool shared = !reader.has_data(i) && !tensor.alias_of.empty();
        bytes[tensor.name] = shared ? memory.at(index.at(tensor.alias_of)) : memory[i];
    }
    return bytes;
}

std::map<std::string, std::vector<std::byte>> read_fixture(const std::string& path,
                                                           const Options& options,
                                                           unsigned threads) {
    StateDictReader reader(path, options, ReaderSettings{threads});
    return read_all(reader);
}

TEST(StateDictReader, EveryFixtureEqualsTheEnginesWeights) {
    for (const char* fixture : kFixtures) {
        SCOPED_TRACE(fixture);
        const std::string path = testing::fixture_path(fixture);
        StateDictReader reader(path, Options{});
        auto ours = read_all(reader);
        auto expected = testing::read_expected_state_dict(path + "/expected.pt");
        EXPECT_EQ(ours.size(), expected.size());
        for (const ExpectedTensor& truth : expected) {
            ASSERT_TRUE(ours.count(truth.name)) << truth.name;
            // The defaults: integer buffers keep their dtype, floating tensors are fp32.
            EXPECT_TRUE(ours.at(truth.name) == truth.bytes) << truth.name;
        }
        for (const ConversionPlan::Tensor& tensor : reader.plan().tensors) {
            const ExpectedTensor* truth = testing::find_tensor(expected, tensor.name);
            ASSERT_NE(truth, nullptr) << tensor.name;
            EXPECT_EQ(tensor.shape, truth->shape) << tensor.name;
            EXPECT_EQ(tensor.dtype, truth->dtype) << tensor.name;
            EXPECT_TRUE(tensor.file.empty());
        }
        EXPECT_TRUE(reader.plan().files.empty());
    }
}

TEST(StateDictReader, ParityEqualsZeroToFp32InOrderDtypeAndBytes) {
    Options parity;
    parity.cast_all_buffers = true;
    parity.keep_frozen_dtype = true;
    parity.stage1_frozen = Stage1Frozen::kSkip;
    for (const char* fixture : kFixtures) {
        const std::string reference = testing::fixture_path(fixture) + "/ref/bin/pytorch_model.bin";
        if (!io::path_exists(reference))
            continue;
        SCOPED_TRACE(fixture);
        StateDictReader reader(testing::fixture_path(fixture), parity, ReaderSettings{3});
        auto ours = read_all(reader);
        auto theirs = testing::read_torch_state_dict(reference);
        const std::vector<ConversionPlan::Tensor>& tensors = reader.plan().tensors;
        ASSERT_EQ(tensors.size(), theirs.size());
        for (std::size_t i = 0; i < theirs.size(); ++i) {
            EXPECT_EQ(tensors[i].name, theirs[i].name);
            EXPECT_EQ(tensors[i].dtype, theirs[i].dtype) << theirs[i].name;
            EXPECT_EQ(tensors[i].shape, theirs[i].shape) << theirs[i].name;
            EXPECT_TRUE(ours.at(theirs[i].name) == theirs[i].bytes) << theirs[i].name;
        }
    }
}

TEST(StateDictReader, SameBytesWhateverTheThreadsCutsAndReadMode) {
    for (const char* fixture : {"z3_ws4_fp32", "z2_ws2_twogroups_fp32", "z2_ws2_frozen_bf16"}) {
        SCOPED_TRACE(fixture);
        const std::string path = testing::fixture_path(fixture);
        Options options;
        // 4 KiB blocks: the one file of these 10-15 kB state dicts is cut between the
        // threads, tensors included (plan/ownership.hpp).
        options.block_size = 4096;
        options.dtype = DType::kBF16;
        auto one = read_fixture(path, options, 1);
        for (unsigned threads : {2U, 3U, 5U}) {
            EXPECT_TRUE(read_fixture(path, options, threads) == one) << threads << " threads";
        }
        for (ReadMode mode : {ReadMode::kBuffered, ReadMode::kDirect}) {
            options.read_mode = mode;
            options.buffer_size = 64 << 10;
            EXPECT_TRUE(read_fixture(path, options, 2) == one) << enum_name(mode);
        }
    }
}

TEST(StateDictReader, Bf16IsTheConversionOfTheFp32Bytes) {
    const std::string path = testing::fixture_path("z3_ws2_fp32");
    Options bf16;
    bf16.dtype = DType::kBF16;
    auto fp32 = read_fixture(path, Options{}, 2);
    auto half = read_fixture(path, bf16, 2);
    for (const auto& [name, bytes] : fp32) {
        std::vector<std::byte> want(bytes.size() / 2);
        io::convert_elements(DType::kF32, bytes, DType::kBF16, want);
        EXPECT_TRUE(half.at(name) == want) << name;
    }
}

TEST(StateDictReader, ADestinationMayAskForAnotherDtype) {
    // DeepSpeed's low-precision masters (bf16, no fp32 copy) read as stored: the engine's bytes.
    const std::string path = testing::fixture_path("../deepspeed-newest/lowp_z3_ws2_bf16");
    StateDictReader reader(path, Options{}, ReaderSettings{2});
    auto expected = testing::read_expected_state_dict(path + "/expected.pt");
    const ConversionPlan& plan = reader.plan();
    for (std::size_t i = 0; i < plan.tensors.size(); ++i) {
        const ExpectedTensor* truth = testing::find_tensor(expected, plan.tensors[i].name);
        ASSERT_NE(truth, nullptr);
        EXPECT_EQ(plan.tensors[i].dtype, DType::kF32);
        EXPECT_EQ(plan.tensors[i].source_dtype, DType::kBF16);
        std::vector<std::byte> memory(truth->bytes.size());
        TensorDestination destination{i, memory, DType::kBF16};
        reader.read({&destination, 1});
        EXPECT_TRUE(memory == truth->bytes) << truth->name;
    }
    std::vector<std::byte> memory(8);
    TensorDestination integers{0, memory, DType::kI64};
    EXPECT_THROW(reader.read({&integers, 1}), Error);
}

TEST(StateDictReader, ParallelCheckpointsEqualTheEnginesWeights) {
    for (const char* fixture :
         {"tp2_dp2_z1_fp32", "pp2_dp2_z1_fp32", "pp2_dp1_z0_fp32", "moe_ep2_dp2_z2_fp32"}) {
        SCOPED_TRACE(fixture);
        const std::string path =
            testing::fixture_path(std::string("../deepspeed-parallel/") + fixture);
        auto ours = read_fixture(path, Options{}, 2);
        auto expected = testing::read_expected_state_dict(path + "/expected.pt");
        EXPECT_EQ(ours.size(), expected.size());
        for (const ExpectedTensor& truth : expected)
            EXPECT_TRUE(ours.at(truth.name) == truth.bytes) << truth.name;
    }
}

// One byte in the middle of an fp32 master partition's record flipped, in a copy.
std::string damaged_copy(const testing::TempDir& dir, std::string& damaged_file) {
    const std::string copy = dir.file("ckpt");
    testing::copy_tree(testing::fixture_path("z3_ws2_fp32"), copy);
    const run::RunPlan plan = run::plan_in_process(copy, Options{}, 1);
    // The record the last tensor's first bytes come from (records also list what is not read).
    const SourceExtent& read = plan.tensors.tensors.back().extents.front();
    const InputRecord& record = *std::find_if(
        plan.tensors.records.begin(), plan.tensors.records.end(), [&](const InputRecord& r) {
            return r.file == read.file && r.offset <= read.offset && read.offset < r.end();
        });
    damaged_file = plan.tensors.inputs.at(record.file).path;
    const std::uint64_t at = record.offset + record.length / 2;
    std::byte byte{};
    io::File::open_read(damaged_file).read_exact(at, {&byte, 1});
    byte ^= std::byte{1};
    io::File::open_write(damaged_file).write_all(at, {&byte, 1});
    return copy;
}

TEST(StateDictReader, ADamagedRecordFailsTheReadThatCompletesIt) {
    testing::TempDir dir;
    std::string damaged;
    const std::string copy = damaged_copy(dir, damaged);
    {
        StateDictReader reader(copy, Options{});
        try {
            read_all(reader);
            FAIL() << "no CRC error";
        } catch (const Error& error) {
            EXPECT_EQ(error.kind(), ErrorKind::kInput);
            EXPECT_NE(std::string(error.what()).find(damaged), std::string::npos) << error.what();
            EXPECT_NE(std::string(error.what()).find("CRC-32"), std::string::npos);
        }
    }
    // One tensor at a time, last first: exactly one read completes the record and fails.
    StateDictReader reader(copy, Options{}, ReaderSettings{2});
    const ConversionPlan& plan = reader.plan();
    int failures = 0;
    for (std::size_t i = plan.tensors.size(); i-- > 0;) {
        std::uint64_t numel = 1;
        for (std::uint64_t d : plan.tensors[i].shape)
            numel *= d;
        std::vector<std::byte> memory(numel * dtype_size(plan.tensors[i].dtype));
        TensorDestination destination{i, memory};
        try {
            reader.read({&destination, 1});
        } catch (const Error& error) {
            ++failures;
            EXPECT_NE(std::string(error.what()).find(damaged), std::string::npos);
        }
    }
    EXPECT_EQ(failures, 1);
    Options unchecked;
    unchecked.input_crc = false;
    StateDictReader trusting(copy, unchecked);
    EXPECT_NO_THROW(read_all(trusting));
}

TEST(StateDictReader, DestinationsThatDoNotFitAreRefused) {
    StateDictReader reader(testing::fixture_path("z3_ws2_tied_fp32"), Options{});
    const ConversionPlan& plan = reader.plan();
    std::vector<std::byte> small(3);
    TensorDestination wrong{0, small};
    EXPECT_THROW(reader.read({&wrong, 1}), Error);
    TensorDestination missing{plan.tensors.size(), small};
    EXPECT_THROW(reader.read({&missing, 1}), Error);
    for (std::size_t i = 0; i < plan.tensors.size(); ++i) {
        if (plan.tensors[i].alias_of.empty())
            continue;
        EXPECT_FALSE(reader.has_data(i));
        std::vector<std::byte> memory(4 * 101 * 24);
        TensorDestination alias{i, memory};
        try {
            reader.read({&alias, 1});
            FAIL() << "an alias read";
        } catch (const Error& error) {
            EXPECT_EQ(error.kind(), ErrorKind::kUsage);
            EXPECT_NE(std::string(error.what()).find(plan.tensors[i].alias_of), std::string::npos);
        }
    }
    Options untie;
    untie.untie = true;
    StateDictReader untied(testing::fixture_path("z3_ws2_tied_fp32"), untie);
    auto bytes = read_all(untied);
    EXPECT_TRUE(bytes.at("lm_head.weight") == bytes.at("embed.weight"));
}

}  // namespace
}  // namespace z2f
