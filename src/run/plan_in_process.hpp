// The RunPlan of a checkpoint computed in this process alone, without MPI: the discovery (either
// reader, checkpoint/routing.hpp), metadata and build_run_plan that z2f::convert runs across
// its ranks, here read serially. plan_conversion shows it; the in-memory reader
// (driver/state_dict_reader.cpp) reads tensors by it, with one "rank" per thread.
#pragma once

#include <cstdint>
#include <filesystem>

#include "run/run_plan.hpp"
#include "zero2fp32/options.hpp"

namespace z2f::run {

// `ranks`: how many share the writes (plan/ownership.hpp). Throws z2f::Error.
RunPlan plan_in_process(const std::filesystem::path& checkpoint, const Options& options,
                        std::uint32_t ranks);

}  // namespace z2f::run
