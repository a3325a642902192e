#include "io/signals.hpp"

#include <csignal>
#include <signal.h>
#include <unistd.h>

namespace z2f::io {
namespace {

volatile std::sig_atomic_t g_signal = 0;
volatile std::sig_atomic_t g_sender = 0;  // a pid: sig_atomic_t is int on Linux
volatile std::sig_atomic_t g_from_kernel = 0;

// The first signal is the one that counts: a later one (a launcher's follow-up SIGTERM) must
// not hide the one that stopped the run. The sender is written before the number, which readers
// test first.
extern "C" void on_termination(int signal, siginfo_t* info, void* /*context*/) {
    if (g_signal != 0)
        return;
    g_sender = info != nullptr ? static_cast<std::sig_atomic_t>(info->si_pid) : 0;
    g_from_kernel = info != nullptr && info->si_code == SI_KERNEL ? 1 : 0;
    g_signal = signal;
}

}  // namespace

void install_signal_handlers() {
    struct sigaction action {};
    action.sa_sigaction = &on_termination;
    sigemptyset(&action.sa_mask);
    // SA_SIGINFO for the sender; no SA_RESTART: a blocking call returns EINTR and the loop
    // re-checks.
    action.sa_flags = SA_SIGINFO;
    ::sigaction(SIGTERM, &action, nullptr);
    ::sigaction(SIGINT, &action, nullptr);
    ignore_write_kill_signals();
}

void ignore_write_kill_signals() {
    ::signal(SIGXFSZ, SIG_IGN);
    ::signal(SIGPIPE, SIG_IGN);
}

int termination_signal() noexcept {
    return static_cast<int>(g_signal);
}

bool termination_from_parent() noexcept {
    return g_signal != 0 && g_sender != 0 &&
           g_sender == static_cast<std::sig_atomic_t>(::getppid());
}

int termination_sender() noexcept {
    return g_signal != 0 ? static_cast<int>(g_sender) : 0;
}

bool termination_from_terminal() noexcept {
    return g_signal != 0 && g_from_kernel != 0;
}

void clear_termination_signal() noexcept {
    g_signal = 0;
    g_sender = 0;
    g_from_kernel = 0;
}

SavedSignalHandlers::SavedSignalHandlers() noexcept {
    ::sigaction(SIGTERM, nullptr, &term_);
    ::sigaction(SIGINT, nullptr, &interrupt_);
    ::sigaction(SIGXFSZ, nullptr, &file_size_);
    ::sigaction(SIGPIPE, nullptr, &pipe_);
}

SavedSignalHandlers::~SavedSignalHandlers() {
    ::sigaction(SIGTERM, &term_, nullptr);
    ::sigaction(SIGINT, &interrupt_, nullptr);
    ::sigaction(SIGXFSZ, &file_size_, nullptr);
    ::sigaction(SIGPIPE, &pipe_, nullptr);
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
