// 405B-shaped synthetic checkpoints at W=512, all data as holes (--sparse-masters): the reader's
// metadata phase and the planner must take them whole, with every tensor's extents inside the
// records, in seconds and a few hundred MB of disk.
#include <chrono>

#include <gtest/gtest.h>

#include "checkpoint/assemble.hpp"
#include "checkpoint/discovery.hpp"
#include "io/posix_file.hpp"
#include "plan/consolidation.hpp"
#include "support/test_files.hpp"
#include "synth/checkpoint_writer.hpp"

namespace z2f::synth {
namespace {

// Sanitized builds pay ~20x for the millions of small allocations of 1024 pickles: they keep
// the 405B widths and W=512 but not all 126 layers.
#if defined(__SANITIZE_ADDRESS__)
constexpr std::uint64_t kLayers = 16;
#else
constexpr std::uint64_t kLayers = 126;
#endif

void expect_405b_plans(int stage) {
    SynthOptions options;
    options.shape = *llama_preset("405b");
    options.shape.layers = kLayers;
    options.stage = stage;
    options.world = 512;
    options.sparse_moments = true;
    options.sparse_masters = true;
    SynthContext context = SynthContext::make(options);
    testing::TempDir dir;
    auto start = std::chrono::steady_clock::now();
    write_checkpoint(context, dir.path());
    auto written = std::chrono::steady_clock::now();

    checkpoint::CheckpointFiles files = checkpoint::discover_checkpoint(dir.path(), "");
    plan::ConsolidationPlan result =
        plan::plan_consolidation(checkpoint::read_checkpoint_meta(files), plan::PlanOptions{});
    auto planned = std::chrono::steady_clock::now();
    std::printf("405B W=512 stage %d: write %.2f s, metadata + plan %.2f s\n", stage,
                std::chrono::duration<double>(written - start).count(),
                std::chrono::duration<double>(planned - written).count());

    const plan::TensorPlan& plan = result.plan;
    ASSERT_EQ(plan.tensors.size(), context.model.params.size());
    std::uint64_t numel = 0;
    for (const plan::PlannedTensor& tensor : plan.tensors) {
        numel += tensor.numel();
        std::uint64_t bytes = 0;
        for (const SourceExtent& extent : tensor.extents) {
            ASSERT_LE(extent.offset + extent.length, plan.inputs[extent.file].size);
            bytes += extent.length;
        }
        ASSERT_EQ(bytes, tensor.source_bytes()) << tensor.name;
    }
    EXPECT_EQ(numel, parameter_count(options.shape, false));
    // The apparent size is hundreds of GB to TB; the blocks are the pickles and headers.
    std::uint64_t apparent = 0;
    std::uint64_t allocated = 0;
    for (const InputFile& input : plan.inputs) {
        apparent += input.size;
        allocated += io::allocated_bytes(input.path);
    }
    EXPECT_GT(apparent, std::uint64_t{1} << 38);
    EXPECT_LT(allocated, std::uint64_t{1} << 30);
}

TEST(SynthScale, Stage3At405bAndW512) {
    expect_405b_plans(3);
}

TEST(SynthScale, Stage2At405bAndW512) {
    expect_405b_plans(2);
}

}  // namespace
}  // namespace z2f::synth
