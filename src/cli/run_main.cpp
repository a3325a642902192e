// The whole zero2fp32-mpi command line as one function (run_main.hpp): parse the command line on
// every rank (identically), convert, and on rank 0 print, write the summary, and choose the exit
// code (README.md, "Exit codes").
//
// The summary is written for every outcome, usage errors included, whenever a path was given;
// when it cannot be written, a run that otherwise succeeded exits 1 (a pipeline that reads it
// must not find an old one, or none, after exit 0). Every rank exits with the same code.
#include "cli/run_main.hpp"

#include <cstdio>

#include <mpi.h>

#include "cli/build_info.hpp"
#include "cli/command_line.hpp"
#include "cli/console_observer.hpp"
#include "cli/exit_code.hpp"
#include "cli/run_printer.hpp"
#include "cli/summary_json.hpp"
#include "io/posix_file.hpp"
#include "io/signals.hpp"
#include "mpi/communicator.hpp"
#include "mpi/mpi_start.hpp"
#include "zero2fp32/mpi.hpp"
#include "zero2fp32/version.hpp"

namespace z2f::cli {
namespace {

// False (and said on stderr) when the file cannot be written.
bool write_summary_file(const std::string& path, const std::string& text) {
    try {
        io::write_file_atomically(path, text);
        return true;
    } catch (const Error& failure) {
        std::fprintf(stderr, "zero2fp32-mpi: error: cannot write the summary: %s\n",
                     failure.what());
        return false;
    }
}

// The run's code, or 1 when a successful run cannot leave its summary.
ExitCode with_summary(const std::string& path, const std::string& text, ExitCode code) {
    if (path.empty() || write_summary_file(path, text))
        return code;
    return code == ExitCode::kOk ? ExitCode::kConversionError : code;
}

ExitCode run(const ConvertRequest& request, bool root, MPI_Comm comm) {
    ConsoleObserver observer(stderr, request.verbosity, request.progress);
    try {
        ConversionResult result =
            convert(request.checkpoint_dir, request.output_dir, request.options, comm, &observer);
        if (!root)
            return ExitCode::kOk;
        if (result.dry_run)
            print_dry_run(stdout, result);
        else if (request.verbosity >= 0)
            print_done(stderr, result);
        return with_summary(request.summary_json,
                            summary_json(request, result, nullptr, ExitCode::kOk), ExitCode::kOk);
    } catch (const ConversionError& error) {
        ExitCode code = exit_code_for(error.kind());
        if (!root)
            return code;
        if (request.verbosity >= -1)
            print_failure(stderr, error, request.verbosity);
        return with_summary(request.summary_json,
                            summary_json(request, error.partial_result(), &error, code), code);
    }
}

}  // namespace

int run_main(int argc, char** argv, MpiUse mpi) {
    // Before MPI_Init, which creates files too: a file-size limit or a closed pipe must give an
    // error (EFBIG, EPIPE), not a kill.
    z2f::io::ignore_write_kill_signals();
    // Without a launcher this process is the job's only rank and MPI is not started at all.
    if (mpi == MpiUse::kIfLaunched)
        z2f::mpi::start_mpi_if_launched(&argc, &argv);
    // Alone, this process is its own communicator even where its host started MPI.
    const MPI_Comm comm = mpi == MpiUse::kIfLaunched ? MPI_COMM_WORLD : MPI_COMM_SELF;
    const z2f::mpi::Communicator world(comm);
    const int rank = world.rank();
    ExitCode code = ExitCode::kOk;
    try {
        z2f::cli::CommandLine command = z2f::cli::parse_command_line(argc, argv);
        if (const auto* help = std::get_if<z2f::cli::HelpRequest>(&command)) {
            if (rank == 0)
                std::fputs(help->text.c_str(), stdout);
        } else if (std::holds_alternative<z2f::cli::VersionRequest>(command)) {
            if (rank == 0)
                std::printf("zero2fp32-mpi %s\n%s", z2f::kVersion, z2f::cli::build_info().c_str());
        } else {
            code = run(std::get<ConvertRequest>(command), rank == 0, comm);
        }
    } catch (const z2f::Error& error) {
        // Parsing and option checks are identical on every rank: all of them exit 2, rank 0
        // says why (and leaves the summary when the command line names one).
        code = z2f::cli::exit_code_for(error.kind());
        if (rank == 0) {
            std::fprintf(stderr, "zero2fp32-mpi: %s\nTry 'zero2fp32-mpi --help'.\n", error.what());
            code = z2f::cli::with_summary(z2f::cli::find_summary_path(argc, argv),
                                          z2f::cli::error_summary_json(error.what(), code), code);
        }
    }
    // Rank 0 alone may have failed to write the summary: every rank takes the worst code.
    code = static_cast<ExitCode>(world.max(static_cast<std::uint64_t>(code)));
    if (mpi == MpiUse::kIfLaunched)
        z2f::mpi::stop_mpi();
    return static_cast<int>(code);
}

}  // namespace z2f::cli
