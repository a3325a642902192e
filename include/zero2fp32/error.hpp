// The one exception type of the library, and the process exit codes built on it.
//
// Every failure the user can cause (a malformed checkpoint, a bad option, a full disk) is an
// `Error` whose message names the file involved and says what was expected. Code paths never
// print and exit on their own: they throw, and the phase driver turns the error into an agreed
// status so that no exception ever crosses an MPI collective.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace z2f {

// Process exit codes. Documented in README.md, "Exit codes"; scripts rely on them.
enum class ExitCode : int {
    kOk = 0,
    kConversionError =
        1,             // malformed or unsupported checkpoint, I/O failure, verification mismatch
    kUsage = 2,        // bad command line
    kInterrupted = 3,  // SIGTERM / SIGINT (Slurm time limit, scancel, preemption)
};

// What kind of failure an Error reports; decides the exit code and the hint printed with it.
enum class ErrorKind {
    kInput,        // the checkpoint is malformed (truncated, corrupt, inconsistent)
    kUnsupported,  // the checkpoint is well-formed but of a kind we refuse (MoE, TP/PP, ...)
    kIo,           // a system call failed
    kUsage,        // the command line is wrong
    kOutput,       // the output directory is not in a state we can write to
    kInterrupted,  // a termination signal arrived
    kInternal,     // a broken invariant: a bug in this program
};

class Error : public std::runtime_error {
  public:
    Error(ErrorKind kind, std::string message)
        : std::runtime_error(std::move(message)), kind_(kind) {}

    ErrorKind kind() const noexcept { return kind_; }

  private:
    ErrorKind kind_;
};

// "<file>: <what>" for malformed input. `file` may be empty when no file is involved.
[[noreturn]] void throw_input_error(std::string_view file, std::string_view what);
[[noreturn]] void throw_unsupported(std::string_view file, std::string_view what);
[[noreturn]] void throw_usage_error(std::string_view what);
[[noreturn]] void throw_output_error(std::string_view what);
[[noreturn]] void throw_internal_error(std::string_view what);
// "<what> '<path>': <strerror(errnum)>".
[[noreturn]] void throw_io_error(std::string_view what, std::string_view path, int errnum);

ExitCode exit_code_for(ErrorKind kind) noexcept;

}  // namespace z2f
