// Collective helpers of the MPI test files: where outputs go ($Z2F_MPI_OUTPUT_DIR, compared
// across rank counts by mpi.identical_across_rank_counts), fresh output folders, and conversions
// on MPI_COMM_WORLD that report how they ended instead of throwing. Every function is called by
// every rank in the same order.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "zero2fp32/mpi.hpp"

namespace z2f::mpi_test {

int rank();
bool root();
void barrier();

// $Z2F_MPI_OUTPUT_DIR, else a folder named after rank 0's pid.
const std::string& output_base();
// A fresh, empty output_base()/name on every rank (rank 0 removes what was there).
std::string fresh_output_dir(const std::string& name);

struct Outcome {
    std::optional<ErrorKind> error;  // nullopt: success
    std::string message;
    ConversionResult result;  // on failure, the partial result
};

// z2f::convert(checkpoint, out) with default options changed by `tweak`.
Outcome run_conversion(const std::string& checkpoint, const std::string& out,
                       const std::function<void(Options&)>& tweak = {});

// Converts to `format` in several small shards (one file for HDF5, which the tests read whole),
// so that there are several files and owners, with `tweak` applied after; then checks the
// output with --verify. Both outcomes, whatever the first was.
struct ConvertedAndVerified {
    Outcome converted;
    Outcome verified;
};
ConvertedAndVerified convert_sharded_and_verify(const std::string& checkpoint,
                                                const std::string& out, OutputFormat format,
                                                const std::function<void(Options&)>& tweak = {});

}  // namespace z2f::mpi_test
