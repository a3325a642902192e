// What a run reports: the ConversionResult (zero2fp32/result.hpp) assembled from the plan, the
// run's outcome and every rank's counters, and the ConversionError thrown when it failed.
#pragma once

#include <cstdint>
#include <vector>

#include "driver/phase_runner.hpp"
#include "run/run_plan.hpp"

namespace z2f::driver {

struct RunFacts {
    const Options* options = nullptr;      // as the run used them
    const run::RunPlan* plan = nullptr;    // null when the run failed before planning
    std::vector<std::uint32_t> completed;  // files complete after a failure, sorted
    bool dry_run = false;
    bool executed = false;
    bool verify_only = false;
    bool verified = false;
    std::uint64_t peak_open_inputs = 0;  // this rank's
    // Rank 0 only:
    std::vector<std::string> checks;     // --verify, per planned file (FileReport::check)
    std::vector<ExistingFile> existing;  // OUT_DIR's output-like files and their fate
    std::string refusal;                 // --dry-run: why the real run would refuse
    bool index_written = false;          // the index phase got that far
    bool record_complete = false;
};

// Collective (sums and maxima over ranks): every rank calls it, in success and failure alike.
ConversionResult build_result(const PhaseRunner& phases, const RunFacts& facts);

// The agreed failure of `phases` as the exception every rank throws.
[[noreturn]] void throw_conversion_error(const PhaseRunner& phases, ConversionResult partial);

}  // namespace z2f::driver
