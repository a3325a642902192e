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
    // --verify: "intact", "differs", "truncated", "too long" or "missing"; empty when the file
    // was not verified.
    std::string check;
};

// What a run does (or, with --dry-run, would do) with a file already in OUT_DIR that is one of
// its outputs or looks like one.
enum class ExistingAction : std::uint8_t {
    kKeep,     // complete and of this run (--resume): left as it is
    kRewrite,  // replaced (--overwrite, or --resume when not vouched for)
    kRemove,   // a stale output of another run, removed (--overwrite)
    kRefuse,   // the run refuses to start because of it
};

struct ExistingFile {
    std::string name;
    ExistingAction action = ExistingAction::kRefuse;
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
    // The longest any rank's --io direct copies waited for reads they needed and for writes
    // to finish (io/posix_file.hpp): which side of the storage bound the run.
    double read_wait_seconds = 0;
    double write_wait_seconds = 0;
    double wall_seconds = 0;
    std::vector<std::pair<std::string, double>> phase_seconds;  // in phase order
    std::vector<std::string> warnings;
    // The options the run used: the caller's, or with --verify those of OUT_DIR's run record.
    Options options;
    // Rank 0, for runs that wrote: whether the index (or latest_universal; true when the plan
    // has none) and the run record marked complete are on disk. With every file complete, a
    // failure in the last phase leaves one of them false.
    bool index_written = false;
    bool record_complete = false;
    std::vector<ExistingFile> existing;  // output-like files found in OUT_DIR (rank 0)
    std::string refusal;  // --dry-run: why the real run would refuse to start (rank 0)
};

template <>
struct EnumNames<ExistingAction> {
    static constexpr std::array<std::pair<ExistingAction, std::string_view>, 4> kTable{{
        {ExistingAction::kKeep, "keep"},
        {ExistingAction::kRewrite, "rewrite"},
        {ExistingAction::kRemove, "remove"},
        {ExistingAction::kRefuse, "refuse"},
    }};
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
