#include "driver/destination/phases.hpp"

#include "common/byte_size.hpp"
#include "common/name_list.hpp"
#include "common/wire_codec.hpp"

namespace z2f::driver {
namespace {

std::vector<std::byte> encode_decision(const std::vector<std::uint32_t>& complete) {
    WireWriter out;
    out.sequence(complete, [](WireWriter& w, std::uint32_t file) { w.u32(file); });
    return out.take();
}

}  // namespace

bool inspect_output(PhaseRunner& phases, run::RunPlan& plan, const std::string& output_dir,
                    const Options& options, OutputPreparation& preparation) {
    bool ok = phases.run("inspect", [&] {
        if (!phases.is_root())
            return;
        preparation.decision =
            inspect_output_dir(plan, output_dir,
                               OutputDirPolicy{options.overwrite, options.resume,
                                               options.space_check, options.dry_run, options});
        const OutputDirDecision& decision = preparation.decision;
        if (!decision.resume_note.empty())
            phases.say(MessageLevel::kWarning, "resume: " + decision.resume_note);
        if (options.resume && decision.complete.size() == plan.files.size() &&
            (!plan.index_name || decision.index_current)) {
            phases.say(MessageLevel::kInfo,
                       "resume: every output file is complete and of this run: nothing to do");
        } else if (!decision.complete.empty()) {
            // One line however many files are kept (a universal checkpoint has thousands);
            // -v lists every one of them.
            std::vector<std::string> kept;
            for (std::uint32_t f : decision.complete)
                kept.push_back(plan.files[f].name());
            phases.say(MessageLevel::kInfo,
                       "resume: " + with_commas(kept.size()) + " of " +
                           with_commas(plan.files.size()) +
                           " output file(s) are complete and kept: " + listed_names(kept));
            for (const std::string& name : kept)
                phases.say(MessageLevel::kVerbose, "resume: kept " + name);
        }
    });
    if (!ok)
        return false;
    std::vector<std::byte> bytes =
        phases.comm().broadcast(phases.is_root() ? encode_decision(preparation.decision.complete)
                                                 : std::vector<std::byte>{});
    return phases.run("inspect", [&] {
        WireReader in(bytes, "output decision");
        std::vector<std::uint32_t> complete = in.sequence(4, [](WireReader& r) { return r.u32(); });
        in.expect_end();
        std::vector<bool> skip(plan.files.size(), false);
        for (std::uint32_t f : complete) {
            if (f >= skip.size())
                in.malformed("file index out of range");
            skip[f] = true;
        }
        plan.apply_resume(skip);
    });
}

bool prepare_output(PhaseRunner& phases, const run::RunPlan& plan, const std::string& output_dir,
                    const Options& options, const OutputPreparation& preparation) {
    return phases.run("prepare", [&] {
        if (phases.is_root())
            prepare_output_dir(plan, output_dir, options, preparation.decision);
    });
}

}  // namespace z2f::driver
