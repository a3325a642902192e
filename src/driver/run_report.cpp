#include "driver/run_report.hpp"

#include <algorithm>
#include <exception>
#include <string>

#include "io/posix_file.hpp"

namespace z2f::driver {
namespace {

// Peak resident set of this process image in bytes: VmHWM of /proc/self/status, or 0 when
// unknown. Not getrusage's ru_maxrss: Linux carries that across execve, so a rank started
// from a large parent (a Python driver, a shell that forked from one) would report the
// parent's peak.
std::uint64_t peak_rss_bytes() {
    std::string status;
    try {
        status = io::read_unsized_file("/proc/self/status", 1u << 16);
    } catch (const std::exception&) {
        return 0;
    }
    const std::size_t at = status.find("\nVmHWM:");
    if (at == std::string::npos)
        return 0;
    std::uint64_t kib = 0;
    for (std::size_t i = at + 7; i < status.size() && status[i] != '\n'; ++i) {
        if (status[i] >= '0' && status[i] <= '9')
            kib = kib * 10 + static_cast<std::uint64_t>(status[i] - '0');
    }
    return kib * 1024;
}

}  // namespace

ConversionResult build_result(const PhaseRunner& phases, const RunFacts& facts) {
    const mpi::Communicator& comm = phases.comm();
    io::IoCounters counters = io::io_counters();
    ConversionResult result;
    result.bytes_read = comm.sum(counters.bytes_read);
    result.bytes_written = comm.sum(counters.bytes_written);
    result.peak_rss_bytes = comm.max(peak_rss_bytes());
    result.peak_open_inputs = comm.max(facts.peak_open_inputs);
    result.read_wait_seconds = static_cast<double>(comm.max(counters.read_wait_ns)) / 1e9;
    result.write_wait_seconds = static_cast<double>(comm.max(counters.write_wait_ns)) / 1e9;
    result.ranks = comm.size();
    result.dry_run = facts.dry_run;
    result.executed = facts.executed;
    result.verify_only = facts.verify_only;
    result.verified = facts.verified;
    result.wall_seconds = phases.elapsed_seconds();
    result.phase_seconds = phases.phase_seconds();
    if (facts.options != nullptr)
        result.options = *facts.options;
    result.existing = facts.existing;
    result.refusal = facts.refusal;
    result.index_written = facts.index_written;
    result.record_complete = facts.record_complete;
    if (facts.plan == nullptr)
        return result;

    const run::RunPlan& plan = *facts.plan;
    result.plan = run::conversion_plan_view(plan);
    result.warnings = plan.warnings;
    result.output_bytes = plan.output_bytes();
    const bool failed = phases.failure().has_value();
    for (std::uint32_t f = 0; f < plan.files.size(); ++f) {
        const run::OutputFileRecord& record = plan.files[f];
        FileReport file;
        file.name = record.name();
        file.size = record.layout.size;
        for (std::uint32_t t = record.first_task; t < record.first_task + record.task_count; ++t)
            file.ranks.push_back(static_cast<int>(plan.tasks[t].rank));
        file.kept = record.skip && !facts.verify_only;  // --verify's skips are files not compared
        if (f < facts.checks.size())
            file.check = facts.checks[f];
        file.complete = facts.verify_only ? file.check == "intact"
                        : failed          ? file.kept || std::binary_search(facts.completed.begin(),
                                                                            facts.completed.end(), f)
                                          : !facts.dry_run;
        result.files.push_back(std::move(file));
    }
    std::vector<std::uint64_t> reads = plan.bytes_to_read();
    for (std::size_t i = 0; i < plan.tensors.inputs.size(); ++i) {
        result.inputs.push_back(
            {plan.tensors.inputs[i].path, plan.tensors.inputs[i].size, reads[i]});
    }
    return result;
}

void throw_conversion_error(const PhaseRunner& phases, ConversionResult partial) {
    const mpi::Agreement& agreement = *phases.failure();
    std::string message;
    for (const std::string& text : agreement.distinct_messages())
        message += (message.empty() ? "" : "\n") + text;
    std::vector<RankFailure> failures;
    for (const mpi::Failure& failure : agreement.failures)
        failures.push_back({failure.rank, failure.kind, failure.message});
    throw ConversionError(agreement.kind, message, std::move(failures), std::move(partial));
}

}  // namespace z2f::driver
