#include "driver/verify_phase.hpp"

#include <algorithm>
#include <map>

#include "common/byte_size.hpp"
#include "common/errors.hpp"
#include "common/wire_codec.hpp"
#include "driver/destination/folders.hpp"
#include "driver/destination/inspection.hpp"
#include "driver/destination/recorded_options.hpp"
#include "driver/destination/run_record.hpp"
#include "driver/execute/direct_executor.hpp"
#include "driver/execute/executor.hpp"
#include "driver/input_check_phase.hpp"
#include "io/input_files.hpp"
#include "io/posix_file.hpp"

namespace z2f::driver {
namespace {

// What rank 0 finds before any byte is compared.
enum class Presence : std::uint8_t { kPresent, kMissing, kShort, kLong };

std::vector<std::byte> encode_findings(const std::vector<VerifyFinding>& findings) {
    WireWriter out;
    out.sequence(findings, [](WireWriter& w, const VerifyFinding& finding) {
        w.u32(finding.file);
        w.str(finding.what);
    });
    return out.take();
}

}  // namespace

bool verify_outputs(PhaseRunner& phases, run::RunPlan& plan, const std::string& output_dir,
                    const Options& options, const RecordedRun& recorded,
                    std::vector<std::string>& checks) {
    // Rank 0: which files are there with their planned size; only those are compared.
    std::vector<Presence> presence(plan.files.size(), Presence::kPresent);
    std::vector<std::uint64_t> sizes(plan.files.size(), 0);
    std::vector<std::byte> present_files;
    bool ok = phases.run("verify", [&] {
        if (!phases.is_root())
            return;
        if (recorded.found && recorded.tag_dir != plan.checkpoint.tag_dir) {
            phases.say(MessageLevel::kWarning, "the run record says '" + output_dir +
                                                   "' was converted from '" + recorded.tag_dir +
                                                   "'; verifying against '" +
                                                   plan.checkpoint.tag_dir + "'");
        }
        if (recorded.found && !recorded.complete) {
            phases.say(MessageLevel::kWarning,
                       "the run that wrote '" + output_dir + "' did not finish");
        }
        std::vector<std::uint32_t> present;
        for (std::uint32_t f = 0; f < plan.files.size(); ++f) {
            const std::string path = output_dir + "/" + plan.files[f].name();
            if (!io::is_regular_file(path)) {
                presence[f] = Presence::kMissing;
                continue;
            }
            sizes[f] = io::file_size(path);
            const std::uint64_t planned = plan.files[f].layout.size;
            presence[f] = sizes[f] < planned   ? Presence::kShort
                          : sizes[f] > planned ? Presence::kLong
                                               : Presence::kPresent;
            if (presence[f] == Presence::kPresent)
                present.push_back(f);
        }
        WireWriter out;
        out.sequence(present, [](WireWriter& w, std::uint32_t file) { w.u32(file); });
        present_files = out.take();
    });
    if (!ok)
        return false;
    std::vector<std::byte> bytes = phases.comm().broadcast(std::move(present_files));

    std::vector<VerifyFinding> mine;
    std::vector<SlotCrc> shared_crcs;
    std::optional<InputCheck> check;
    io::InputFiles inputs(plan.tensors.inputs, io::InputFiles::default_capacity());
    ok = phases.run("verify", [&] {
        WireReader in(bytes, "files to verify");
        std::vector<bool> skip(plan.files.size(), true);
        for (std::uint32_t f : in.sequence(4, [](WireReader& r) { return r.u32(); })) {
            if (f >= skip.size())
                in.malformed("file index out of range");
            skip[f] = false;
        }
        in.expect_end();
        plan.apply_resume(skip);  // "skip" here: not compared
        check = prepare_input_check(phases, plan, options);
        mine = verify_tasks(plan, RankTarget{output_dir, phases.rank()}, inputs,
                            copy_options(options), check ? &*check : nullptr, shared_crcs);
    });
    if (!ok)
        return false;
    // The CRC tails of files several ranks wrote, by their leads, from every rank's CRCs.
    const std::vector<SlotCrc> all_crcs = gather_slot_crcs(phases.comm(), shared_crcs);
    ok = phases.run("verify", [&] {
        for (VerifyFinding& finding :
             verify_shared_tails(plan, RankTarget{output_dir, phases.rank()}, all_crcs))
            mine.push_back(std::move(finding));
    });
    if (!ok)
        return false;
    std::vector<std::vector<std::byte>> gathered = phases.comm().all_gather(encode_findings(mine));
    std::vector<run::FailedRecord> damaged;
    if (check)
        damaged = agree_input_check(phases.comm(), plan, *check);

    return phases.run("verify", [&] {
        std::map<std::uint32_t, std::vector<std::string>> differences;
        for (const std::vector<std::byte>& from_rank : gathered) {
            WireReader in(from_rank, "verify findings");
            for (VerifyFinding& finding : in.sequence(5, [](WireReader& r) {
                     VerifyFinding f;
                     f.file = r.u32();
                     f.what = r.str();
                     return f;
                 })) {
                if (finding.file >= plan.files.size())
                    in.malformed("file index out of range");
                differences[finding.file].push_back(std::move(finding.what));
            }
            in.expect_end();
        }
        if (!phases.is_root())
            return;
        std::vector<std::string> problems;
        checks.assign(plan.files.size(), "intact");
        for (std::uint32_t f = 0; f < plan.files.size(); ++f) {
            const std::string& name = plan.files[f].name();
            const std::string planned = with_commas(plan.files[f].layout.size);
            std::string line;
            switch (presence[f]) {
                case Presence::kMissing:
                    checks[f] = "missing";
                    line = name + ": missing (expected " + planned + " bytes)";
                    break;
                case Presence::kShort:
                    checks[f] = "truncated";
                    line = name + ": truncated: " + with_commas(sizes[f]) + " of " + planned +
                           " bytes";
                    break;
                case Presence::kLong:
                    checks[f] = "too long";
                    line = name + ": " + with_commas(sizes[f]) + " bytes, expected " + planned;
                    break;
                case Presence::kPresent:
                    if (auto it = differences.find(f); it != differences.end()) {
                        checks[f] = "differs";
                        line = name + ": differs: ";
                        for (std::size_t i = 0; i < it->second.size(); ++i)
                            line += (i == 0 ? "" : "; ") + it->second[i];
                    }
                    break;
            }
            if (line.empty()) {
                phases.say(MessageLevel::kInfo, "verify: " + name + ": intact");
            } else {
                problems.push_back(line);
            }
        }
        if (plan.index_name) {
            const std::string path = output_dir + "/" + *plan.index_name;
            if (!io::is_regular_file(path)) {
                problems.push_back(*plan.index_name + ": missing");
            } else if (io::read_small_file(path, 1u << 30) != plan.index_json) {
                problems.push_back(*plan.index_name + ": differs from the index of this output");
            } else {
                phases.say(MessageLevel::kInfo, "verify: " + *plan.index_name + ": intact");
            }
        }
        for (const std::string& name : io::list_directory(output_dir)) {
            bool planned = name == plan.index_name.value_or("") ||
                           std::any_of(plan.files.begin(), plan.files.end(),
                                       [&](const auto& file) { return file.name() == name; });
            if (!planned && is_output_like_name(plan.format, name)) {
                phases.say(MessageLevel::kWarning,
                           "verify: " + name + " is not one of this output's files");
            }
        }
        if (!problems.empty() || !damaged.empty()) {
            std::string message =
                problems.empty()
                    ? std::string("verification failed: the checkpoint itself is damaged")
                    : "verification failed: " + std::to_string(problems.size()) + " of " +
                          std::to_string(plan.files.size() + (plan.index_name ? 1 : 0)) +
                          " file(s) are not what the checkpoint gives";
            for (const std::string& line : problems)
                message += "\n  " + line;
            // Outputs that match a damaged input are not intact either.
            if (!damaged.empty())
                message +=
                    "\n  input check: " + run::describe_failed_records(plan, check->plan, damaged);
            throw Error(ErrorKind::kInput, message);
        }
        phases.say(MessageLevel::kInfo, "verify: every output byte matches the checkpoint (" +
                                            format_byte_size(plan.output_bytes()) + ")");
    });
}

}  // namespace z2f::driver
