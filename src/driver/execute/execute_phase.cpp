#include "driver/execute/execute_phase.hpp"

#include <algorithm>
#include <optional>

#include "common/errors.hpp"
#include "common/wire_codec.hpp"
#include "driver/execute/direct_executor.hpp"
#include "driver/execute/executor.hpp"
#include "driver/input_check_phase.hpp"
#include "io/input_files.hpp"
#include "io/signals.hpp"
#include "mpi/peer_channel.hpp"

namespace z2f::driver {
namespace {

// Every rank's list of files, merged and sorted on every rank.
std::vector<std::uint32_t> gather_files(const mpi::Communicator& comm,
                                        const std::vector<std::uint32_t>& mine) {
    WireWriter out;
    out.sequence(mine, [](WireWriter& w, std::uint32_t file) { w.u32(file); });
    std::vector<std::uint32_t> all;
    for (const auto& bytes : comm.all_gather(out.bytes())) {
        WireReader in(bytes, "completed files");
        for (std::uint32_t file : in.sequence(4, [](WireReader& r) { return r.u32(); }))
            all.push_back(file);
        in.expect_end();
    }
    std::sort(all.begin(), all.end());
    all.erase(std::unique(all.begin(), all.end()), all.end());
    return all;
}

// After a failed input check: the files this rank completed that hold bytes of a failed record.
void remove_damaged_outputs(const run::RunPlan& plan, const run::InputCheckPlan& check,
                            const std::vector<run::FailedRecord>& failed,
                            const std::string& output_dir, ExecuteReport& report) noexcept {
    std::vector<std::uint32_t> damaged;
    for (const run::FailedRecord& record : failed) {
        const std::vector<std::uint32_t>& files = check.records[record.checked].files;
        damaged.insert(damaged.end(), files.begin(), files.end());
    }
    std::erase_if(report.completed_files, [&](std::uint32_t file) {
        if (std::find(damaged.begin(), damaged.end(), file) == damaged.end())
            return false;
        try {
            io::remove_file(output_dir + "/" + plan.files[file].name());
        } catch (...) {
            return false;  // still there: reported as complete, as it is on disk
        }
        return true;
    });
}

}  // namespace

ExecuteOutcome execute_and_finalize(PhaseRunner& phases, const run::RunPlan& plan,
                                    const std::string& output_dir, const Options& options) {
    const mpi::Communicator& comm = phases.comm();
    const RankTarget target{output_dir, phases.rank()};
    io::InputFiles inputs(plan.tensors.inputs, io::InputFiles::default_capacity());
    mpi::PeerChannel channel(comm);
    Observer* observer = phases.observer();
    if (observer != nullptr)
        observer->progress_started(plan.bytes_to_write());

    std::uint64_t done = 0;
    io::DirectCopyOptions copy = copy_options(options);
    // Between buffers: a termination signal or another rank's failure stops the copy (the
    // copier throws CopyStopped, turned below into what it means).
    copy.on_progress = [&](std::uint64_t bytes) {
        done += bytes;
        if (io::termination_signal() != 0 || channel.peer_failed())
            return false;
        if (comm.is_root()) {
            if (observer != nullptr)
                observer->progress(channel.total_progress(done));
        } else {
            channel.report_progress(done);
        }
        return true;
    };
    ExecuteReport report;
    std::optional<InputCheck> check;
    mpi::Outcome outcome = mpi::capture([&] {
        throw_if_interrupted();
        check = prepare_input_check(phases, plan, options);
        try {
            execute_tasks(plan, target, inputs, copy, report, check ? &*check : nullptr);
        } catch (const io::CopyStopped&) {
            throw_if_interrupted();
            throw mpi::StoppedByPeer{};
        }
    });
    if (outcome.kind == mpi::OutcomeKind::kFailed)
        channel.announce_failure();
    if (!comm.is_root())
        channel.report_progress(done, true);
    comm.quiet_barrier([&] {
        if (observer != nullptr)
            observer->progress(channel.total_progress(done));
    });
    channel.drain();
    if (observer != nullptr)
        observer->progress_finished(channel.total_progress(done));

    ExecuteOutcome result;
    result.peak_open_inputs = inputs.peak_open();
    result.ok = phases.settle("execute", outcome);
    if (result.ok && check) {
        // Before any shared file is finished: outputs of a damaged input never get a final
        // name, and those a rank already renamed are removed, so --resume cannot trust them.
        std::vector<run::FailedRecord> failed = agree_input_check(comm, plan, *check);
        result.ok = phases.run("input check", [&] {
            if (!failed.empty())
                throw Error(ErrorKind::kInput,
                            run::describe_failed_records(plan, check->plan, failed));
        });
        if (!result.ok)
            remove_damaged_outputs(plan, check->plan, failed, output_dir, report);
    }
    // Every rank's finished files and shared-file CRCs, for the report or the tails.
    std::vector<std::uint32_t> completed = gather_files(comm, report.completed_files);
    std::vector<SlotCrc> crcs = gather_slot_crcs(comm, report.shared_crcs);
    if (result.ok) {
        result.ok = phases.run("finalize", [&] {
            for (std::uint32_t f = 0; f < plan.files.size(); ++f) {
                if (plan.is_shared(f) && !plan.files[f].skip &&
                    plan.lead_of(f).rank == target.rank) {
                    finalize_shared_file(plan, output_dir, f, crcs);
                    completed.push_back(f);
                }
            }
        });
    }
    if (!result.ok) {
        remove_temp_files(plan, target, report);
        result.completed = gather_files(comm, completed);
    }
    return result;
}

}  // namespace z2f::driver
