// What a conversion did (z2f::convert's value), and the error it throws when it failed, which
// carries what was known by then (complete files, counters).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "zero2fp32/error.hpp"
#include "zero2fp32/plan.hpp"

namespace z2f {

struct FileReport {
    std::string name;
    std::uint64_t size = 0;
    std::vector<int> ranks;  // the ranks that write it
    bool kept = false;       // complete from an earlier run (--resume), not written again
    bool complete = false;   // on disk under its final name when the run ended
};

struct InputReport {
    std::string path;
    std::uint64_t size = 0;
    std::uint64_t bytes_needed = 0;  // tensor bytes the plan reads from it
};

struct ConversionResult {
    ConversionPlan plan;  // the checkpoint's facts, the files and the tensors
    int ranks = 0;
    std::vector<FileReport> files;  // parallel to plan.files
    std::vector<InputReport> inputs;
    bool dry_run = false;      // nothing was written
    bool executed = false;     // the write phase ran: output files may exist
    bool verify_only = false;  // an existing output was only verified
    bool verified = false;     // every output byte was compared with the checkpoint
    std::uint64_t output_bytes = 0;
    std::uint64_t bytes_read = 0;      // all ranks
    std::uint64_t bytes_written = 0;   // all ranks
    std::uint64_t peak_rss_bytes = 0;  // the largest of any rank
    std::uint64_t peak_open_inputs = 0;
    double wall_seconds = 0;
    std::vector<std::pair<std::string, double>> phase_seconds;  // in phase order
    std::vector<std::string> warnings;
};

struct RankFailure {
    int rank = 0;
    ErrorKind kind = ErrorKind::kInternal;
    std::string message;
};

// Thrown by z2f::convert on every rank alike. kind() is the run's: kInterrupted if any rank was
// interrupted, else the lowest failing rank's; what() lists every distinct message.
class ConversionError : public Error {
  public:
    ConversionError(ErrorKind kind, std::string message, std::vector<RankFailure> failures,
                    ConversionResult partial)
        : Error(kind, std::move(message)),
          failures_(std::move(failures)),
          partial_(std::move(partial)) {}

    const std::vector<RankFailure>& failures() const noexcept { return failures_; }
    const ConversionResult& partial_result() const noexcept { return partial_; }

  private:
    std::vector<RankFailure> failures_;
    ConversionResult partial_;
};

}  // namespace z2f
