#include "driver/input_check_phase.hpp"

#include "common/errors.hpp"
#include "common/wire_codec.hpp"

namespace z2f::driver {

std::optional<InputCheck> prepare_input_check(PhaseRunner& phases, const run::RunPlan& plan,
                                              const Options& options) {
    if (!options.input_crc)
        return std::nullopt;
    InputCheck check;
    check.plan = run::plan_input_check(plan);
    if (std::optional<std::string> warning = run::unchecked_records_warning(plan, check.plan))
        phases.say(MessageLevel::kWarning, *warning);
    return check;
}

std::vector<run::FailedRecord> agree_input_check(const mpi::Communicator& comm,
                                                 const run::RunPlan& plan,
                                                 const InputCheck& check) {
    const std::vector<run::CheckPiece>& pieces = check.plan.pieces;
    const auto me = static_cast<std::uint32_t>(comm.rank());
    WireWriter out;
    std::uint64_t mine = 0;
    for (const run::CheckPiece& piece : pieces)
        mine += piece.rank == me ? 1 : 0;
    out.u64(mine);
    for (std::uint32_t p = 0; p < pieces.size(); ++p) {
        if (pieces[p].rank == me) {
            out.u32(p);
            out.u32(check.piece_crcs.at(p));
        }
    }
    std::vector<std::uint32_t> crcs(pieces.size(), 0);
    std::vector<std::vector<std::byte>> gathered = comm.all_gather(out.bytes());
    for (std::uint32_t rank = 0; rank < gathered.size(); ++rank) {
        WireReader in(gathered[rank], "input check piece CRCs");
        const std::size_t count = in.count(8);
        for (std::size_t i = 0; i < count; ++i) {
            const std::uint32_t piece = in.u32();
            const std::uint32_t crc = in.u32();
            if (piece >= pieces.size() || pieces[piece].rank != rank)
                in.malformed("piece " + std::to_string(piece) + " is not rank " +
                             std::to_string(rank) + "'s");
            crcs[piece] = crc;
        }
        in.expect_end();
    }
    return run::failed_records(check.plan, plan.tensors.records, crcs);
}

}  // namespace z2f::driver
