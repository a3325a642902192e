#include "mpi/agreement.hpp"

#include <algorithm>

#include "common/wire_codec.hpp"

namespace z2f::mpi {

std::vector<std::string> Agreement::distinct_messages() const {
    std::vector<std::string> out;
    for (const Failure& failure : failures) {
        if (std::find(out.begin(), out.end(), failure.message) == out.end()) {
            out.push_back(failure.message);
        }
    }
    return out;
}

std::vector<std::byte> encode_outcome(const Outcome& outcome) {
    WireWriter out;
    out.enumerator(outcome.kind);
    out.enumerator(outcome.error);
    out.str(outcome.message);
    return out.take();
}

Outcome decode_outcome(std::span<const std::byte> bytes) {
    WireReader in(bytes, "phase outcome");
    Outcome outcome;
    outcome.kind = in.enumerator(OutcomeKind::kStopped);
    outcome.error = in.enumerator(ErrorKind::kInternal);
    outcome.message = in.str();
    in.expect_end();
    return outcome;
}

Agreement agree(const Communicator& comm, const Outcome& local) {
    std::vector<std::vector<std::byte>> all = comm.all_gather(encode_outcome(local));

    Agreement agreement;
    bool interrupted = false;
    for (std::size_t rank = 0; rank < all.size(); ++rank) {
        Outcome outcome = decode_outcome(all[rank]);
        if (outcome.kind == OutcomeKind::kOk) {
            continue;
        }
        agreement.ok = false;
        if (outcome.kind == OutcomeKind::kStopped) {
            continue;
        }
        Failure failure;
        failure.rank = static_cast<int>(rank);
        failure.kind = outcome.error;
        failure.message = std::move(outcome.message);
        interrupted = interrupted || failure.kind == ErrorKind::kInterrupted;
        agreement.failures.push_back(std::move(failure));
    }
    if (!agreement.ok) {
        if (interrupted) {
            agreement.kind = ErrorKind::kInterrupted;
        } else if (!agreement.failures.empty()) {
            agreement.kind = agreement.failures.front().kind;
        } else {
            agreement.kind = ErrorKind::kInternal;  // stopped without a reason: a bug
            agreement.failures.push_back(
                {0, ErrorKind::kInternal, "internal error: ranks stopped without a failure"});
        }
    }
    return agreement;
}

}  // namespace z2f::mpi
