#include "parallel/agreement.hpp"

#include <algorithm>

#include "common/bytes.hpp"

namespace z2f::parallel {

std::vector<std::string> Agreement::distinct_messages() const {
    std::vector<std::string> out;
    for (const Failure& failure : failures) {
        if (std::find(out.begin(), out.end(), failure.message) == out.end()) {
            out.push_back(failure.message);
        }
    }
    return out;
}

Agreement agree(const Communicator& comm, const Outcome& local) {
    ByteWriter writer;
    writer.put_u8(static_cast<std::uint8_t>(local.kind));
    writer.put_u8(static_cast<std::uint8_t>(local.error));
    writer.put<std::uint64_t>(local.message.size());
    writer.put_text(local.message);
    std::vector<std::vector<std::byte>> all = comm.all_gather(writer.bytes());

    Agreement agreement;
    bool interrupted = false;
    for (std::size_t rank = 0; rank < all.size(); ++rank) {
        const std::vector<std::byte>& bytes = all[rank];
        auto kind = static_cast<OutcomeKind>(std::to_integer<std::uint8_t>(bytes[0]));
        if (kind == OutcomeKind::kOk) {
            continue;
        }
        agreement.ok = false;
        if (kind == OutcomeKind::kStopped) {
            continue;
        }
        Failure failure;
        failure.rank = static_cast<int>(rank);
        failure.kind = static_cast<ErrorKind>(std::to_integer<std::uint8_t>(bytes[1]));
        auto length = static_cast<std::size_t>(load_le<std::uint64_t>(&bytes[2]));
        failure.message.assign(reinterpret_cast<const char*>(&bytes[10]), length);
        interrupted = interrupted || failure.kind == ErrorKind::kInterrupted;
        agreement.failures.push_back(std::move(failure));
    }
    if (!agreement.ok) {
        if (interrupted) {
            agreement.exit_code = ExitCode::kInterrupted;
        } else if (!agreement.failures.empty()) {
            agreement.exit_code = exit_code_for(agreement.failures.front().kind);
        } else {
            agreement.exit_code = ExitCode::kConversionError;  // stopped without a reason: a bug
            agreement.failures.push_back(
                {0, ErrorKind::kInternal, "internal error: ranks stopped without a failure"});
        }
    }
    return agreement;
}

}  // namespace z2f::parallel
