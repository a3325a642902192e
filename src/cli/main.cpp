// zero2fp32-mpi: `srun -n N zero2fp32-mpi CKPT_DIR OUT_DIR [options]`. A thin front end over
// z2f::convert (cli/run_main.hpp).
#include "cli/run_main.hpp"

int main(int argc, char** argv) {
    return z2f::cli::run_main(argc, argv, z2f::cli::MpiUse::kIfLaunched);
}
