// The mean of replicas (io/replica_mean.hpp) as ds_to_universal.py computes it,
// sum(slices) / len(slices) on torch tensors: each addition and the division in the dtype,
// rounded after each step, Python's sum() starting from 0.
#include "io/replica_mean.hpp"

#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "io/dtype_convert.hpp"
#include "support/test_files.hpp"
#include "zero2fp32/error.hpp"

namespace z2f::io {
namespace {

std::vector<std::byte> f32(const std::vector<float>& values) {
    std::vector<std::byte> bytes(values.size() * 4);
    std::memcpy(bytes.data(), values.data(), bytes.size());
    return bytes;
}

std::vector<float> floats(const std::vector<std::byte>& bytes) {
    std::vector<float> values(bytes.size() / 4);
    std::memcpy(values.data(), bytes.data(), bytes.size());
    return values;
}

std::vector<float> mean_f32(const std::vector<std::vector<float>>& replicas) {
    std::vector<std::vector<std::byte>> bytes;
    std::vector<std::span<const std::byte>> views;
    for (const auto& replica : replicas)
        bytes.push_back(f32(replica));
    for (const auto& b : bytes)
        views.push_back(b);
    std::vector<std::byte> out(bytes.front().size());
    replica_mean(DType::kF32, views, out);
    return floats(out);
}

TEST(ReplicaMean, Float32AddsInOrderThenDivides) {
    // Three replicas: ((a + b) + c) / 3 in float, the order of a sequential sum.
    const float a = 1.0f, b = 1e-8f, c = -1.0f;
    const std::vector<float> got = mean_f32({{a, 2.0f}, {b, 4.0f}, {c, 6.0f}});
    volatile float sum = (0.0f + a) + b;  // 1.0f: b is lost to rounding
    sum = sum + c;
    EXPECT_EQ(std::bit_cast<std::uint32_t>(got[0]), std::bit_cast<std::uint32_t>(sum / 3.0f));
    EXPECT_EQ(got[0], 0.0f);  // not 1e-8/3: what torch gives too
    EXPECT_EQ(got[1], 4.0f);
}

TEST(ReplicaMean, EqualReplicasGiveThemselvesAndSumStartsFromZero) {
    const std::vector<float> values = {1.5f, -3.25e-38f, 7.0e30f, -0.0f, 0.1f};
    const std::vector<float> got = mean_f32({values, values});
    for (std::size_t i = 0; i < values.size(); ++i) {
        if (values[i] == 0.0f) {
            // 0 + -0.0 is +0.0 (Python's sum), so the mean of -0.0s is +0.0.
            EXPECT_EQ(std::bit_cast<std::uint32_t>(got[i]), 0u);
        } else {
            EXPECT_EQ(got[i], values[i]) << i;
        }
    }
}

TEST(ReplicaMean, Bfloat16RoundsAfterEveryOperation) {
    // bf16 1.0 + 2^-8 rounds to 1.0 (ties to even) before the next replica is added.
    auto bf16 = [](std::vector<float> values) {
        std::vector<std::byte> wide = f32(values), narrow(values.size() * 2);
        convert_elements(DType::kF32, wide, DType::kBF16, narrow);
        return narrow;
    };
    std::vector<std::byte> r0 = bf16({1.0f}), r1 = bf16({0.00390625f}), r2 = bf16({0.00390625f});
    std::vector<std::span<const std::byte>> views = {r0, r1, r2};
    std::vector<std::byte> out(2);
    replica_mean(DType::kBF16, views, out);
    std::vector<std::byte> wide(4);
    convert_elements(DType::kBF16, out, DType::kF32, wide);
    // Rounded each step: (1 + 2^-8) -> 1, (1 + 2^-8) -> 1, 1 / 3 -> bf16(0.333...).
    std::vector<std::byte> third = bf16({1.0f / 3.0f});
    EXPECT_EQ(out, third);
}

TEST(ReplicaMean, OtherDtypesAreRefused) {
    std::vector<std::byte> a(8), b(8), out(8);
    std::vector<std::span<const std::byte>> views = {a, b};
    EXPECT_THROW(replica_mean(DType::kI64, views, out), Error);
}

TEST(ReplicaMean, StreamsAreReadChunkByChunkFromTheirExtents) {
    testing::TempDir dir;
    std::vector<float> x(3000), y(3000);
    for (std::size_t i = 0; i < x.size(); ++i) {
        x[i] = static_cast<float>(i) * 0.5f;
        y[i] = static_cast<float>(i) * 1.5f + 1.0f;
    }
    // One file: x split in two extents, y after it.
    std::vector<std::byte> file = f32(x), ybytes = f32(y);
    file.insert(file.end(), ybytes.begin(), ybytes.end());
    testing::write_file_bytes(dir.file("in"), file);
    InputFiles inputs({{dir.file("in"), file.size()}}, 4);
    std::vector<std::vector<SourceExtent>> replicas = {{{0, 0, 4000}, {0, 4000, 8000}},
                                                       {{0, 12000, 12000}}};
    std::vector<std::byte> scratch(3 * 1000);  // 250 elements per chunk
    std::vector<std::byte> means;
    stream_replica_mean(inputs, replicas, DType::kF32, scratch,
                        [&](std::span<const std::byte> chunk) {
                            EXPECT_LE(chunk.size(), 1000u);
                            means.insert(means.end(), chunk.begin(), chunk.end());
                        });
    std::vector<float> got = floats(means);
    ASSERT_EQ(got.size(), x.size());
    for (std::size_t i = 0; i < x.size(); ++i)
        ASSERT_EQ(got[i], (x[i] + y[i]) / 2.0f) << i;
}

}  // namespace
}  // namespace z2f::io
