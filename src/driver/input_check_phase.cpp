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
    // Files in torch's legacy format have no CRCs at all: the plan's warnings say so
    // (run/run_plan.hpp). Here, the zip records written with torch's CRC computation off.
    std::vector<std::uint32_t> zip_records;
    for (std::uint32_t r : check.plan.without_crc) {
        if (!plan.tensors.records.at(r).format_has_no_crc)
            zip_records.push_back(r);
    }
    if (!zip_records.empty()) {
        const InputRecord& first = plan.tensors.records.at(zip_records.front());
        phases.say(MessageLevel::kWarning,
                   std::to_string(zip_records.size()) +
                       " input record(s) carry no CRC-32 (written with torch's CRC computation "
                       "off), so their bytes cannot be checked; the first: '" +
                       plan.tensors.inputs.at(first.file).path + "': " + first.name);
    }
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
