// z2f::convert, phase by phase (docs/architecture.md, "Phases"):
//
//   record     (--verify, --resume) rank 0 reads OUT_DIR's run record: the options it was
//              written with, which these runs keep
//   discover   rank 0 finds the checkpoint's files and which reader they take; broadcast
//   paths      rank 0 refuses output paths that are usage errors (destination/path_rules.hpp)
//   metadata   rank r interprets inputs r, r+P, ...; all-gathered; assembled on every rank
//   plan       every rank computes the same RunPlan: tensors, files, layouts, owners
//   verify     (--verify) every rank compares the files it would write; nothing is written
//   inspect    rank 0 looks at OUT_DIR: conflicts, the run record for --resume, free space
//   replicas   (parallel checkpoints) the copies of replicated and tied tensors are compared
//   prepare    rank 0 creates OUT_DIR and writes the run record (nothing is written before)
//   execute    every rank writes its tasks; failures are announced to all ranks at once
//   finalize   leads of shared files append their CRC tails
//   index      rank 0 checks every file, writes the index, copies side files, keeps the record
//
// Each phase runs inside PhaseRunner::run, which captures exceptions and agrees on the outcome,
// so no exception ever crosses a collective and every rank takes the same road; a failed run
// throws the same ConversionError on every rank once every collective is done.
#include <optional>

#include "common/byte_size.hpp"
#include "driver/destination/path_rules.hpp"
#include "driver/destination/phases.hpp"
#include "driver/destination/record_phase.hpp"
#include "driver/execute/execute_phase.hpp"
#include "driver/execute/replica_check.hpp"
#include "driver/finish_phase.hpp"
#include "driver/metadata_phase.hpp"
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
    if (plan.parallel) {
        const ConversionPlan::ParallelGrid& grid = *plan.parallel;
        return grid.kind + " checkpoint, TP " + std::to_string(grid.tp) + " x PP " +
               std::to_string(grid.pp) + " x DP " + std::to_string(grid.dp) +
               (grid.sp > 1 ? " x SP " + std::to_string(grid.sp) : "") +
               (grid.ep > 1 ? " (EP " + std::to_string(grid.ep) + ")" : "") +
               (grid.zero ? ", ZeRO stage " + std::to_string(plan.zero_stage) : ", no ZeRO") +
               (plan.ds_version.empty() ? "" : ", DeepSpeed " + plan.ds_version);
    }
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
        facts_.options = &options_;
        driver::RecordedRun recorded;
        facts_.verify_only = options_.verify;
        if ((options_.verify || options_.resume) &&
            !driver::adopt_run_record(phases_, checkpoint_, output_dir_, options_, recorded))
            return false;
        checkpoint::DiscoveredCheckpoint files;
        if (!phases_.run("discover",
                         [&] { files = driver::discover(phases_.comm(), checkpoint_, options_); }))
            return false;
        say_discovered(files);
        // As soon as the tag folder is known, before the metadata is read.
        if (!phases_.run("paths", [&] {
                if (phases_.is_root())
                    driver::check_output_path({checkpoint_, files.tag_dir(), output_dir_,
                                               options_.format, files.checkpoint_dir()});
            }))
            return false;
        run::CheckpointMetadata meta;
        if (!phases_.run("metadata",
                         [&] { meta = driver::read_checkpoint_metadata(phases_.comm(), files); }))
            return false;
        if (!phases_.run("plan", [&] {
                plan_.emplace(run::build_run_plan(run::tensor_source(meta, options_), settings()));
            }))
            return false;
        facts_.plan = &*plan_;
        announce_plan();

        if (options_.verify) {
            if (!driver::verify_outputs(phases_, *plan_, output_dir_, options_, recorded,
                                        facts_.checks))
                return false;
            facts_.verified = true;
            return true;
        }

        driver::OutputPreparation preparation;
        bool inspected =
            driver::inspect_output(phases_, *plan_, output_dir_, options_, preparation);
        facts_.existing = preparation.decision.existing;
        facts_.refusal = preparation.decision.refusal;
        if (!inspected)
            return false;
        if (options_.dry_run) {
            facts_.dry_run = true;
            return true;
        }
        if (!driver::check_replicas(phases_, *plan_, options_))
            return false;
        if (!driver::prepare_output(phases_, *plan_, output_dir_, options_, preparation))
            return false;
        facts_.executed = true;
        driver::ExecuteOutcome executed =
            driver::execute_and_finalize(phases_, *plan_, output_dir_, options_);
        facts_.peak_open_inputs = executed.peak_open_inputs;
        facts_.completed = executed.completed;
        if (!executed.ok)
            return false;
        // Every planned file is on disk under its final name from here on.
        facts_.completed.clear();
        for (std::uint32_t f = 0; f < plan_->files.size(); ++f)
            facts_.completed.push_back(f);
        driver::IndexOutcome indexed;
        const bool ok = phases_.run(
            "index", [&] { driver::write_index(phases_, *plan_, output_dir_, options_, indexed); });
        facts_.index_written = indexed.index_written;
        facts_.record_complete = indexed.record_complete;
        return ok;
    }

    void say_discovered(const checkpoint::DiscoveredCheckpoint& found) const {
        if (const auto* grid = std::get_if<checkpoint::FileGrid>(&found.files)) {
            phases_.say(MessageLevel::kVerbose,
                        "checkpoint: " + grid->folder.tag_dir + " (parallel: " +
                            std::to_string(grid->mp_size()) + " model-parallel ranks, " +
                            std::to_string(grid->dp_size()) + " optimizer files each, " +
                            std::to_string(grid->layer_files.size()) + " layer files, " +
                            std::to_string(grid->expert_files.size()) + " expert files)");
            return;
        }
        if (const auto* universal = std::get_if<checkpoint::UniversalFolder>(&found.files)) {
            phases_.say(MessageLevel::kVerbose,
                        "checkpoint: " + universal->files.tag_dir + " (universal: " +
                            std::to_string(universal->params.size()) + " parameter folders, " +
                            std::to_string(universal->files.model_files.size()) + " model files)");
            return;
        }
        const auto& files = std::get<checkpoint::CheckpointFiles>(found.files);
        phases_.say(MessageLevel::kVerbose,
                    "checkpoint: " + files.tag_dir + " (" +
                        std::to_string(files.optim_files.size()) + " optimizer files, " +
                        std::to_string(files.model_files.size()) + " model files)");
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
    Options options_;  // --verify replaces the output-shaping ones with OUT_DIR's record
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
