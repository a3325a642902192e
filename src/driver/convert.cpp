// z2f::convert, phase by phase (docs/architecture.md, "Phases"):
//
//   discover   rank 0 finds the checkpoint's files; broadcast
//   metadata   rank r interprets inputs r, r+P, ...; all-gathered; assembled on every rank
//   plan       every rank computes the same RunPlan: tensors, files, layouts, owners
//   prepare    rank 0 inspects and prepares OUT_DIR (nothing is written before this passes)
//   execute    every rank writes its tasks; failures are announced to all ranks at once
//   finalize   leads of shared files append their CRC tails
//   index      rank 0 checks every file, writes the index, copies side files
//   verify     (--verify) every rank re-reads what it wrote and compares
//
// Each phase runs inside PhaseRunner::run, which captures exceptions and agrees on the outcome,
// so no exception ever crosses a collective and every rank takes the same road; a failed run
// throws the same ConversionError on every rank once every collective is done.
#include <optional>

#include "common/byte_size.hpp"
#include "driver/execute_phase.hpp"
#include "driver/finish_phase.hpp"
#include "driver/metadata_phase.hpp"
#include "driver/output_phase.hpp"
#include "driver/output_placement.hpp"
#include "driver/phase_runner.hpp"
#include "driver/run_report.hpp"
#include "driver/verify_phase.hpp"
#include "io/signals.hpp"
#include "run/run_plan.hpp"
#include "zero2fp32/mpi.hpp"
#include "zero2fp32/version.hpp"

namespace z2f {
namespace {

using driver::PhaseRunner;

std::string checkpoint_summary(const run::RunPlan& plan) {
    return "ZeRO stage " + std::to_string(plan.zero_stage) + ", world size " +
           std::to_string(plan.world_size) +
           (plan.ds_version.empty() ? "" : ", DeepSpeed " + plan.ds_version);
}

std::string plan_summary(const run::RunPlan& plan) {
    std::uint64_t data = 0;
    for (const run::OutputFileRecord& file : plan.files)
        data += file.data_bytes;
    return std::to_string(plan.tensors.tensors.size() - plan.copied_pieces) + " tensors, " +
           std::to_string(plan.files.size()) + " " + std::string(enum_name(plan.format)) +
           " file(s), " + format_byte_size(data) + " on " + std::to_string(plan.ranks) + " rank(s)";
}

class Conversion {
  public:
    Conversion(std::string checkpoint, std::string output_dir, const Options& options,
               MPI_Comm comm, Observer* observer)
        : checkpoint_(std::move(checkpoint)),
          output_dir_(std::move(output_dir)),
          options_(options),
          phases_(comm, observer) {}

    ConversionResult run() {
        bool ok = run_phases();
        ConversionResult result = driver::build_result(phases_, facts_);
        if (!ok)
            driver::throw_conversion_error(phases_, std::move(result));
        return result;
    }

  private:
    bool run_phases() {
        checkpoint::CheckpointFiles files;
        if (!phases_.run("discover", [&] {
                files =
                    driver::discover_files(phases_.comm(), checkpoint_, options_.tag,
                                           checkpoint::DiscoveryOptions{options_.from_universal});
            }))
            return false;
        phases_.say(MessageLevel::kVerbose,
                    "checkpoint: " + files.tag_dir + " (" +
                        std::to_string(files.optim_files.size()) + " optimizer files, " +
                        std::to_string(files.model_files.size()) + " model files)");
        checkpoint::CheckpointMeta meta;
        if (!phases_.run("metadata", [&] { meta = driver::read_metadata(phases_.comm(), files); }))
            return false;
        if (!phases_.run("plan", [&] { plan_.emplace(run::build_run_plan(meta, settings())); }))
            return false;
        facts_.plan = &*plan_;
        announce_plan();
        // The one placement a universal checkpoint may take that no other output may: beside
        // the original (output_placement.hpp).
        if (options_.format == OutputFormat::kUniversal && !phases_.run("prepare", [&] {
                if (phases_.is_root())
                    driver::check_output_placement(output_dir_, checkpoint_, files,
                                                   options_.format);
            }))
            return false;

        driver::OutputPreparation preparation;
        if (!driver::inspect_output(phases_, *plan_, output_dir_, options_, preparation))
            return false;
        facts_.verify_only = preparation.verify_only;
        if (options_.dry_run) {
            facts_.dry_run = true;
            return true;
        }
        if (!preparation.verify_only) {
            if (!driver::prepare_output(phases_, *plan_, output_dir_, preparation))
                return false;
            facts_.executed = true;
            driver::ExecuteOutcome executed =
                driver::execute_and_finalize(phases_, *plan_, output_dir_, options_);
            facts_.peak_open_inputs = executed.peak_open_inputs;
            facts_.completed = executed.completed;
            if (!executed.ok)
                return false;
            if (!phases_.run("index",
                             [&] { driver::write_index(phases_, *plan_, output_dir_, options_); }))
                return false;
        }
        if (options_.verify || preparation.verify_only) {
            if (!driver::verify_outputs(phases_, *plan_, output_dir_, options_))
                return false;
            facts_.verified = true;
        }
        return true;
    }

    run::RunSettings settings() const {
        run::RunSettings settings;
        settings.options = options_;
        settings.ranks = static_cast<std::uint32_t>(phases_.comm().size());
        settings.writer_version = kVersion;
        return settings;
    }

    void announce_plan() const {
        const run::RunPlan& plan = *plan_;
        phases_.say(MessageLevel::kInfo, checkpoint_summary(plan));
        for (const std::string& note : plan.notes)
            phases_.say(MessageLevel::kVerbose, "note: " + note);
        for (const std::string& warning : plan.warnings)
            phases_.say(MessageLevel::kWarning, warning);
        if (Observer* observer = phases_.observer())
            observer->planned(run::conversion_plan_view(plan));
        phases_.say(MessageLevel::kInfo, plan_summary(plan));
    }

    std::string checkpoint_;
    std::string output_dir_;
    const Options& options_;
    PhaseRunner phases_;
    std::optional<run::RunPlan> plan_;
    driver::RunFacts facts_;
};

}  // namespace

ConversionResult convert(const std::filesystem::path& checkpoint,
                         const std::filesystem::path& output_dir, const Options& options,
                         MPI_Comm comm, Observer* observer) {
    // Identical on every rank, before any collective: every rank throws alike.
    run::validate_options(options);
    io::install_signal_handlers();
    std::string out = output_dir.string();
    while (out.size() > 1 && out.back() == '/')
        out.pop_back();
    return Conversion(checkpoint.string(), out, options, comm, observer).run();
}

}  // namespace z2f
