// zero2fp32-mpi: `srun -n N zero2fp32-mpi CKPT_DIR OUT_DIR [options]`. A thin front end: parse
// the command line on every rank (identically), let rank 0 print, run the conversion.
#include <cstdio>

#include <mpi.h>

#include "cli/command_line.hpp"
#include "io/signals.hpp"
#include "parallel/mpi_start.hpp"
#include "zero2fp32/convert.hpp"
#include "zero2fp32/error.hpp"
#include "zero2fp32/version.hpp"

int main(int argc, char** argv) {
    // Before MPI_Init, which creates files too: a file-size limit must give EFBIG, not a kill.
    z2f::io::ignore_file_size_signal();
    z2f::parallel::start_mpi(&argc, &argv);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    z2f::ExitCode code = z2f::ExitCode::kOk;
    try {
        z2f::cli::CommandLine command = z2f::cli::parse_command_line(argc, argv);
        if (const auto* help = std::get_if<z2f::cli::HelpRequest>(&command)) {
            if (rank == 0)
                std::fputs(help->text.c_str(), stdout);
        } else if (std::holds_alternative<z2f::cli::VersionRequest>(command)) {
            if (rank == 0)
                std::printf("zero2fp32-mpi %s\n", z2f::kVersion);
        } else {
            code = z2f::run_conversion(std::get<z2f::ConvertOptions>(command), MPI_COMM_WORLD);
        }
    } catch (const z2f::Error& error) {
        // Parsing is identical on every rank: all of them exit 2, rank 0 says why.
        if (rank == 0) {
            std::fprintf(stderr, "zero2fp32-mpi: %s\nTry 'zero2fp32-mpi --help'.\n", error.what());
        }
        code = z2f::ExitCode::kUsage;
    }
    MPI_Finalize();
    return static_cast<int>(code);
}
