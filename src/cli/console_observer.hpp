// What zero2fp32-mpi shows on stderr while the library converts (rank 0 only): messages at or
// below the chosen verbosity, the progress display, and with -d every tensor of the plan as
// zero_to_fp32 --debug lists them.
#pragma once

#include <cstdio>
#include <optional>

#include "cli/command_line.hpp"
#include "cli/progress_printer.hpp"
#include "zero2fp32/mpi.hpp"

namespace z2f::cli {

class ConsoleObserver : public Observer {
  public:
    ConsoleObserver(std::FILE* out, int verbosity, ProgressMode progress);

    void message(MessageLevel level, std::string_view text) override;
    void planned(const ConversionPlan& plan) override;
    void progress_started(std::uint64_t total) override;
    void progress(std::uint64_t done) override;
    void progress_finished(std::uint64_t done) override;

  private:
    std::FILE* out_;
    int verbosity_;
    ProgressMode mode_;
    std::optional<ProgressPrinter> printer_;
};

}  // namespace z2f::cli
