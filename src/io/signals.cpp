#include "io/signals.hpp"

#include <csignal>
#include <signal.h>

namespace z2f::io {
namespace {

volatile std::sig_atomic_t g_signal = 0;

// The first signal is the one that counts: a launcher that is itself interrupted (Ctrl-C
// reaches mpirun and the ranks alike) follows up with SIGTERM to every rank, which must not
// hide the SIGINT that stopped the run.
extern "C" void on_termination(int signal) {
    if (g_signal == 0)
        g_signal = signal;
}

}  // namespace

void install_signal_handlers() {
    struct sigaction action {};
    action.sa_handler = &on_termination;
    sigemptyset(&action.sa_mask);
    action.sa_flags = 0;  // no SA_RESTART: a blocking call returns EINTR and the loop re-checks
    ::sigaction(SIGTERM, &action, nullptr);
    ::sigaction(SIGINT, &action, nullptr);
    ignore_file_size_signal();
}

void ignore_file_size_signal() {
    ::signal(SIGXFSZ, SIG_IGN);
}

int termination_signal() noexcept {
    return static_cast<int>(g_signal);
}

const char* signal_name(int signal) noexcept {
    switch (signal) {
        case SIGTERM:
            return "SIGTERM";
        case SIGINT:
            return "SIGINT";
        default:
            return "a signal";
    }
}

}  // namespace z2f::io
