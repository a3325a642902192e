// Process exit codes of the tools (README.md, "Exit codes"); scripts rely on them. The library
// reports an ErrorKind; only the front ends turn it into a code.
#pragma once

#include "zero2fp32/error.hpp"

namespace z2f::cli {

enum class ExitCode : int {
    kOk = 0,
    kConversionError = 1,  // malformed or unsupported checkpoint, I/O failure, mismatch
    kUsage = 2,            // bad command line
    kInterrupted = 3,      // SIGTERM / SIGINT (Slurm time limit, scancel, preemption)
};

constexpr ExitCode exit_code_for(ErrorKind kind) noexcept {
    switch (kind) {
        case ErrorKind::kUsage:
            return ExitCode::kUsage;
        case ErrorKind::kInterrupted:
            return ExitCode::kInterrupted;
        case ErrorKind::kInput:
        case ErrorKind::kUnsupported:
        case ErrorKind::kIo:
        case ErrorKind::kOutput:
        case ErrorKind::kInternal:
            break;
    }
    return ExitCode::kConversionError;
}

}  // namespace z2f::cli
