// Process signals the converter cares about.
//
// SIGTERM and SIGINT (Slurm's time limit, scancel, preemption, Ctrl-C) are recorded, not
// obeyed on the spot: the copy loop checks `termination_signal()` between buffers and the run
// then ends like any other error (temp files removed, no index, exit code 3). SIGXFSZ and
// SIGPIPE are ignored so that a write that cannot be done fails with an error we report (EFBIG
// past RLIMIT_FSIZE, EPIPE on a closed pipe or socket) instead of killing the process: a rank
// writing its last message to a launcher that is already tearing the step down (srun
// --kill-on-bad-exit) must still end with its own exit code.
#pragma once

#include <signal.h>

namespace z2f::io {

void install_signal_handlers();
// Only the SIGXFSZ and SIGPIPE part; main() calls it before MPI_Init, which itself writes files.
void ignore_write_kill_signals();
// The first of SIGTERM/SIGINT received, or 0.
int termination_signal() noexcept;
// Whether that signal came from this process's parent: the launcher (mpirun or its daemon,
// slurmstepd), which sends SIGTERM to every rank when the job is cancelled or when the launcher
// is itself interrupted (mpirun turns a SIGINT it gets into SIGTERM to the ranks, whose own
// process groups a terminal's Ctrl-C does not reach).
bool termination_from_parent() noexcept;
// Where that signal came from, as the kernel says (siginfo): the sending process's pid, or 0
// when the kernel itself sent it (a terminal's Ctrl-C, whose SIGINT goes to the foreground
// process group).
int termination_sender() noexcept;
bool termination_from_terminal() noexcept;
const char* signal_name(int signal) noexcept;
// Forgets the termination signal recorded: a process that goes on after an interrupted
// conversion (the Python interpreter) may run another one.
void clear_termination_signal() noexcept;

// The dispositions of SIGTERM, SIGINT, SIGXFSZ and SIGPIPE when constructed, put back when
// destroyed: a host process (the Python interpreter, whose Ctrl-C raises KeyboardInterrupt) keeps
// its own handlers after a conversion installed the converter's.
class SavedSignalHandlers {
  public:
    SavedSignalHandlers() noexcept;
    ~SavedSignalHandlers();
    SavedSignalHandlers(const SavedSignalHandlers&) = delete;
    SavedSignalHandlers& operator=(const SavedSignalHandlers&) = delete;

  private:
    struct sigaction term_ {};
    struct sigaction interrupt_ {};
    struct sigaction file_size_ {};
    struct sigaction pipe_ {};
};

}  // namespace z2f::io
