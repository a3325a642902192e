// Agreeing on how a phase went, so that every rank takes the same road afterwards.
//
// Each rank runs a phase inside `capture()`, which turns any exception into an Outcome instead
// of letting it escape; then all ranks call `agree()` (an all-gather of the outcomes). Every
// rank learns every failure, in rank order, and derives the same failure kind: interrupted if
// any rank was interrupted, else the kind of the lowest failing rank's error. A rank that only
// stopped because another one failed reports kStopped, which is not a failure of its own.
#pragma once

#include <exception>
#include <new>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "common/errors.hpp"
#include "mpi/communicator.hpp"

namespace z2f::mpi {

enum class OutcomeKind : std::uint8_t { kOk, kFailed, kStopped };

struct Outcome {
    OutcomeKind kind = OutcomeKind::kOk;
    ErrorKind error = ErrorKind::kInternal;
    std::string message;

    bool ok() const noexcept { return kind == OutcomeKind::kOk; }
    static Outcome failure(ErrorKind error, std::string message) {
        return {OutcomeKind::kFailed, error, std::move(message)};
    }
    static Outcome stopped() { return {OutcomeKind::kStopped, ErrorKind::kInternal, {}}; }
};

// Thrown inside a phase when this rank must stop because another rank failed; captured as
// kStopped.
struct StoppedByPeer {};

template <typename Work>
Outcome capture(Work&& work) noexcept {
    try {
        work();
        return {};
    } catch (const Error& error) {
        return Outcome::failure(error.kind(), error.what());
    } catch (const StoppedByPeer&) {
        return Outcome::stopped();
    } catch (const std::bad_alloc&) {
        return Outcome::failure(ErrorKind::kInternal, "out of memory");
    } catch (const std::exception& error) {
        return Outcome::failure(ErrorKind::kInternal,
                                std::string("internal error: ") + error.what());
    } catch (...) {
        return Outcome::failure(ErrorKind::kInternal, "internal error: unknown exception");
    }
}

struct Failure {
    int rank = 0;
    ErrorKind kind = ErrorKind::kInternal;
    std::string message;
};

struct Agreement {
    bool ok = true;
    std::vector<Failure> failures;  // rank order
    // The run's failure kind: kInterrupted if any rank was interrupted, else the lowest failing
    // rank's.
    ErrorKind kind = ErrorKind::kInternal;
    // Messages without repeats (a deterministic error is raised by every rank alike).
    std::vector<std::string> distinct_messages() const;
};

Agreement agree(const Communicator& comm, const Outcome& local);

// An outcome on the wire (common/wire_codec.hpp): kind, error kind, message. Every rank decodes
// the same all-gathered bytes, so a malformed payload fails every rank alike.
std::vector<std::byte> encode_outcome(const Outcome& outcome);
Outcome decode_outcome(std::span<const std::byte> bytes);

}  // namespace z2f::mpi
