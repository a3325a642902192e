// The exception type of the library.
//
// Every failure the user can cause (a malformed checkpoint, a bad option, a full disk) is an
// `Error` whose message names the file involved and says what was expected, and whose kind says
// what went wrong. The library never prints and never exits: it throws; inside a conversion
// every phase turns errors into an agreed outcome so that no exception crosses an MPI
// collective, and z2f::convert then throws the same ConversionError (result.hpp) on every rank.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace z2f {

enum class ErrorKind : std::uint8_t {
    kInput,        // the checkpoint is malformed (truncated, corrupt, inconsistent)
    kUnsupported,  // the checkpoint is well-formed but of a kind we refuse
    kIo,           // a system call failed
    kUsage,        // the options are wrong or contradict each other
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

}  // namespace z2f
