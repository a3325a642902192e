// zero2fp32-mpi: `srun -n N zero2fp32-mpi CKPT_DIR OUT_DIR [options]`. A thin front end over
// z2f::convert: parse the command line on every rank (identically), convert, and on rank 0
// print, write the summary, and choose the exit code (README.md, "Exit codes").
#include <cstdio>

#include <mpi.h>

#include "cli/command_line.hpp"
#include "cli/console_observer.hpp"
#include "cli/exit_code.hpp"
#include "cli/run_printer.hpp"
#include "cli/summary_json.hpp"
#include "io/posix_file.hpp"
#include "io/signals.hpp"
#include "parallel/mpi_start.hpp"
#include "zero2fp32/mpi.hpp"
#include "zero2fp32/version.hpp"

namespace z2f::cli {
namespace {

void write_summary(const ConvertRequest& request, const ConversionResult& result,
                   const ConversionError* error, ExitCode code) {
    if (request.summary_json.empty())
        return;
    try {
        io::write_file_atomically(request.summary_json, summary_json(request, result, error, code));
    } catch (const Error& failure) {
        std::fprintf(stderr, "zero2fp32-mpi: warning: cannot write the summary: %s\n",
                     failure.what());
    }
}

ExitCode run(const ConvertRequest& request, bool root) {
    ConsoleObserver observer(stderr, request.verbosity, request.progress);
    try {
        ConversionResult result = convert(request.checkpoint_dir, request.output_dir,
                                          request.options, MPI_COMM_WORLD, &observer);
        if (root) {
            if (result.dry_run)
                print_dry_run(stdout, result);
            else if (request.verbosity >= 0)
                print_done(stderr, result);
            write_summary(request, result, nullptr, ExitCode::kOk);
        }
        return ExitCode::kOk;
    } catch (const ConversionError& error) {
        ExitCode code = exit_code_for(error.kind());
        if (root) {
            if (request.verbosity >= -1)
                print_failure(stderr, error, true);
            write_summary(request, error.partial_result(), &error, code);
        }
        return code;
    }
}

}  // namespace
}  // namespace z2f::cli

int main(int argc, char** argv) {
    using z2f::cli::ExitCode;
    // Before MPI_Init, which creates files too: a file-size limit must give EFBIG, not a kill.
    z2f::io::ignore_file_size_signal();
    z2f::parallel::start_mpi(&argc, &argv);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    ExitCode code = ExitCode::kOk;
    try {
        z2f::cli::CommandLine command = z2f::cli::parse_command_line(argc, argv);
        if (const auto* help = std::get_if<z2f::cli::HelpRequest>(&command)) {
            if (rank == 0)
                std::fputs(help->text.c_str(), stdout);
        } else if (std::holds_alternative<z2f::cli::VersionRequest>(command)) {
            if (rank == 0)
                std::printf("zero2fp32-mpi %s\n", z2f::kVersion);
        } else {
            code = z2f::cli::run(std::get<z2f::cli::ConvertRequest>(command), rank == 0);
        }
    } catch (const z2f::Error& error) {
        // Parsing and option checks are identical on every rank: all of them exit 2, rank 0
        // says why.
        if (rank == 0) {
            std::fprintf(stderr, "zero2fp32-mpi: %s\nTry 'zero2fp32-mpi --help'.\n", error.what());
        }
        code = z2f::cli::exit_code_for(error.kind());
    }
    MPI_Finalize();
    return static_cast<int>(code);
}
