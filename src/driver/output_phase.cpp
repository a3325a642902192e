#include "driver/output_phase.hpp"

#include "common/wire_codec.hpp"
#include "driver/verify_phase.hpp"

namespace z2f::driver {
namespace {

std::vector<std::byte> encode_decision(bool verify_only,
                                       const std::vector<std::uint32_t>& complete) {
    WireWriter out;
    out.boolean(verify_only);
    out.sequence(complete, [](WireWriter& w, std::uint32_t file) { w.u32(file); });
    return out.take();
}

}  // namespace

bool inspect_output(PhaseRunner& phases, run::RunPlan& plan, const std::string& output_dir,
                    const Options& options, OutputPreparation& preparation) {
    bool ok = phases.run("prepare", [&] {
        if (!phases.is_root())
            return;
        if (options.verify && !options.overwrite && !options.resume &&
            outputs_present(plan, output_dir)) {
            preparation.verify_only = true;  // check an existing conversion against the checkpoint
            return;
        }
        preparation.decision = inspect_output_dir(
            plan, output_dir,
            OutputDirPolicy{options.overwrite, options.resume, options.space_check});
        for (std::uint32_t f : preparation.decision.complete)
            phases.say(MessageLevel::kInfo,
                       "resume: " + plan.files[f].name() + " is complete, skipped");
    });
    if (!ok)
        return false;
    std::vector<std::byte> bytes = phases.comm().broadcast(
        phases.is_root() ? encode_decision(preparation.verify_only, preparation.decision.complete)
                         : std::vector<std::byte>{});
    return phases.run("prepare", [&] {
        WireReader in(bytes, "output decision");
        preparation.verify_only = in.boolean();
        std::vector<std::uint32_t> complete = in.sequence(4, [](WireReader& r) { return r.u32(); });
        in.expect_end();
        std::vector<bool> skip(plan.files.size(), preparation.verify_only);
        for (std::uint32_t f : complete) {
            if (f >= skip.size())
                in.malformed("file index out of range");
            skip[f] = true;
        }
        plan.apply_resume(skip);
    });
}

bool prepare_output(PhaseRunner& phases, const run::RunPlan& plan, const std::string& output_dir,
                    const OutputPreparation& preparation) {
    return phases.run("prepare", [&] {
        if (phases.is_root())
            prepare_output_dir(plan, output_dir, preparation.decision);
    });
}

}  // namespace z2f::driver
