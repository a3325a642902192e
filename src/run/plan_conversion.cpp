// z2f::plan_conversion (zero2fp32/plan.hpp): the plan of a conversion in one process, without
// MPI. The same discovery, metadata and RunPlan as z2f::convert, read serially
// (run/plan_in_process.hpp).
#include "run/plan_in_process.hpp"
#include "zero2fp32/plan.hpp"

namespace z2f {

ConversionPlan plan_conversion(const std::filesystem::path& checkpoint, const Options& options) {
    return run::conversion_plan_view(run::plan_in_process(checkpoint, options, 1));
}

}  // namespace z2f
