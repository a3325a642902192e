// Process signals the converter cares about.
//
// SIGTERM and SIGINT (Slurm's time limit, scancel, preemption, Ctrl-C) are recorded, not
// obeyed on the spot: the copy loop checks `termination_signal()` between buffers and the run
// then ends like any other error (temp files removed, no index, exit code 3). SIGXFSZ is
// ignored so that exceeding RLIMIT_FSIZE makes write() fail with EFBIG, a clean error, instead
// of killing the process.
#pragma once

namespace z2f::io {

void install_signal_handlers();
// Only the SIGXFSZ part; main() calls it before MPI_Init, which itself writes files.
void ignore_file_size_signal();
// The first of SIGTERM/SIGINT received, or 0.
int termination_signal() noexcept;
const char* signal_name(int signal) noexcept;

}  // namespace z2f::io
