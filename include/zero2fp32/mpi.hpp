// The conversion on an MPI communicator: the only public header that includes <mpi.h>.
//
//   z2f::ConversionResult result = z2f::convert(ckpt, out, options, MPI_COMM_WORLD);
//
// Collective: every rank of `comm` calls it with the same arguments. Each rank owns a disjoint
// set of output files (or byte ranges of shared ones), reads only what they need and writes
// them; rank 0 writes the index after every rank succeeded. Only metadata crosses MPI.
// On failure every rank throws the same z2f::ConversionError (after every collective is
// done, so no rank is left waiting); invalid options throw z2f::Error(kUsage) on every rank
// before any I/O. The library never prints: messages and progress go to the observer.
// Called while MPI is not initialized, it runs in this process alone and calls no MPI function
// but MPI_Initialized (the command-line tool does that when no launcher started it).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string_view>

#include <mpi.h>

#include "zero2fp32/options.hpp"
#include "zero2fp32/plan.hpp"
#include "zero2fp32/result.hpp"

namespace z2f {

enum class MessageLevel : std::uint8_t {
    kWarning,  // something the user should know; the run goes on
    kInfo,     // the run's main steps
    kVerbose,  // notes about the checkpoint and the plan
};

// Called on rank 0 only, from the calling thread.
class Observer {
  public:
    virtual ~Observer() = default;
    virtual void message(MessageLevel /*level*/, std::string_view /*text*/) {}
    // After the plan phase, before anything is written.
    virtual void planned(const ConversionPlan& /*plan*/) {}
    // Bytes of output written by all ranks; `total` is what this run writes.
    virtual void progress_started(std::uint64_t /*total*/) {}
    virtual void progress(std::uint64_t /*done*/) {}
    virtual void progress_finished(std::uint64_t /*done*/) {}
};

ConversionResult convert(const std::filesystem::path& checkpoint,
                         const std::filesystem::path& output_dir, const Options& options,
                         MPI_Comm comm, Observer* observer = nullptr);

}  // namespace z2f
