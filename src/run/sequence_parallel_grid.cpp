#include "run/sequence_parallel_grid.hpp"

namespace z2f::run {

ConversionPlan::ParallelGrid describe_sequence_parallel_grid(
    const checkpoint::CheckpointMeta& meta) {
    ConversionPlan::ParallelGrid grid;
    grid.kind = "sequence-parallel (Ulysses)";
    grid.sp = meta.sequence_parallel;
    grid.dp = meta.world_size / meta.sequence_parallel;
    grid.zero = true;
    // ZeRO rank R is sequence-parallel rank R mod S of data-parallel group R div S.
    auto place = [&](std::size_t rank) {
        return "ZeRO rank " + std::to_string(rank) + " (SP rank " + std::to_string(rank % grid.sp) +
               ", DP rank " + std::to_string(rank / grid.sp) + ")";
    };
    const checkpoint::CheckpointFiles& files = meta.files;
    for (std::size_t i = 0; i < files.model_files.size(); ++i) {
        grid.files.push_back({files.model_files[i], files.per_rank_model_files
                                                        ? "model states, " + place(i)
                                                        : std::string("model states")});
    }
    for (std::size_t i = 0; i < files.optim_files.size(); ++i)
        grid.files.push_back({files.optim_files[i], "ZeRO partition, " + place(i)});
    return grid;
}

}  // namespace z2f::run
