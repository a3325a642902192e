// The conversion, phase by phase (design.md §2):
//
//   discover   rank 0 finds the checkpoint's files; broadcast
//   metadata   rank r interprets inputs r, r+P, ...; all-gathered; assembled on every rank
//   plan       every rank computes the same plan: tensors, selection, shards, layouts, owners
//   prepare    rank 0 inspects and prepares OUT_DIR (nothing is written before this passes)
//   execute    every rank writes its tasks; failures are announced to all ranks at once
//   agree      every rank learns every outcome; shared files are finished by their leads
//   index      rank 0 checks every file, writes the index, copies side files
//
// Each phase runs inside capture() and ends with agree(), so no exception ever crosses a
// collective and every rank takes the same road. Only rank 0 prints.
#include "zero2fp32/convert.hpp"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <sys/resource.h>

#include "checkpoint/assemble.hpp"
#include "checkpoint/discovery.hpp"
#include "checkpoint/meta_codec.hpp"
#include "common/crc32.hpp"
#include "common/wire_codec.hpp"
#include "driver/executor.hpp"
#include "driver/output_dir.hpp"
#include "driver/progress_printer.hpp"
#include "io/input_files.hpp"
#include "io/posix_file.hpp"
#include "io/signals.hpp"
#include "output/output_plan.hpp"
#include "parallel/agreement.hpp"
#include "parallel/communicator.hpp"
#include "parallel/peer_channel.hpp"
#include "plan/consolidation.hpp"
#include "plan/ownership.hpp"
#include "plan/selection.hpp"
#include "zero2fp32/version.hpp"

namespace z2f::driver {
namespace {

using parallel::Agreement;
using parallel::Communicator;
using parallel::Outcome;
using Clock = std::chrono::steady_clock;

DType to_dtype(DTypeOption option) {
    switch (option) {
        case DTypeOption::kBf16:
            return DType::kBF16;
        case DTypeOption::kFp16:
            return DType::kF16;
        case DTypeOption::kFp32:
            break;
    }
    return DType::kF32;
}

output::OutputFormat to_format(FormatOption option) {
    switch (option) {
        case FormatOption::kTorch:
            return output::OutputFormat::kTorch;
        case FormatOption::kHdf5:
            return output::OutputFormat::kHdf5;
        case FormatOption::kSafetensors:
            break;
    }
    return output::OutputFormat::kSafetensors;
}

io::IoBackend to_backend(IoOption option) {
    switch (option) {
        case IoOption::kMmap:
            return io::IoBackend::kMmap;
        case IoOption::kCopyFileRange:
            return io::IoBackend::kCopyFileRange;
        case IoOption::kPread:
            break;
    }
    return io::IoBackend::kPread;
}

const char* format_name(output::OutputFormat format) {
    switch (format) {
        case output::OutputFormat::kSafetensors:
            return "safetensors";
        case output::OutputFormat::kTorch:
            return "torch";
        case output::OutputFormat::kHdf5:
            return "hdf5";
    }
    return "?";
}

const char* io_name(IoOption option) {
    switch (option) {
        case IoOption::kMmap:
            return "mmap";
        case IoOption::kCopyFileRange:
            return "copy_file_range";
        case IoOption::kPread:
            return "pread";
    }
    return "?";
}

// Peak resident set of this process in bytes (VmHWM), or 0 when unknown.
std::uint64_t peak_rss_bytes() {
    struct rusage usage {};
    if (::getrusage(RUSAGE_SELF, &usage) != 0) {
        return 0;
    }
    return static_cast<std::uint64_t>(usage.ru_maxrss) * 1024;  // Linux reports KiB
}

// --- the run -------------------------------------------------------------------------------

class Conversion {
  public:
    Conversion(const ConvertOptions& options, MPI_Comm comm)
        : options_(options), comm_(comm), start_(Clock::now()) {}

    ExitCode run() {
        ExitCode code = run_phases();
        write_summary(code);
        return code;
    }

  private:
    // Prints to stderr on rank 0 only.
    void say(int level, const std::string& text) const {
        if (comm_.is_root() && options_.verbosity >= level) {
            std::fprintf(stderr, "%s\n", text.c_str());
        }
    }

    bool agreed(const char* phase, const Outcome& outcome) {
        Agreement agreement = parallel::agree(comm_, outcome);
        phase_seconds_.emplace_back(
            phase, std::chrono::duration<double>(Clock::now() - phase_start_).count());
        phase_start_ = Clock::now();
        if (agreement.ok) {
            return true;
        }
        failure_ = std::move(agreement);
        for (const std::string& message : failure_->distinct_messages()) {
            say(-1, "zero2fp32-mpi: error: " + message);
        }
        return false;
    }

    ExitCode failed() const { return failure_ ? failure_->exit_code : ExitCode::kConversionError; }

    ExitCode run_phases() {
        phase_start_ = Clock::now();
        if (!agreed("discover", parallel::capture([&] { discover(); })))
            return failed();
        if (!agreed("metadata", parallel::capture([&] { read_metadata(); })))
            return failed();
        if (!agreed("plan", parallel::capture([&] { plan(); })))
            return failed();
        bool verify_only = false;
        if (!agreed("prepare", parallel::capture([&] { inspect_output(verify_only); })))
            return failed();
        share_decision(verify_only);
        if (options_.dry_run) {
            print_dry_run();
            return ExitCode::kOk;
        }
        if (!verify_only) {
            if (!agreed("prepare", parallel::capture([&] {
                            if (comm_.is_root())
                                prepare_output_dir(dir_request_, decision_);
                        }))) {
                return failed();
            }
            if (!execute())
                return failed();
            if (!agreed("index", parallel::capture([&] { write_index(); })))
                return failed();
        }
        if (options_.verify || verify_only) {
            if (!verify())
                return failed();
        }
        return ExitCode::kOk;
    }

    void check_signal() const {
        if (int signal = io::termination_signal()) {
            throw Error(ErrorKind::kInterrupted,
                        std::string("interrupted by ") + io::signal_name(signal));
        }
    }

    void discover() {
        std::vector<std::byte> encoded;
        Outcome outcome = parallel::capture([&] {
            if (comm_.is_root()) {
                files_ = checkpoint::discover_checkpoint(options_.checkpoint_dir, options_.tag);
                encoded = checkpoint::encode_files(files_);
            }
        });
        // Rank 0's outcome travels with the broadcast so that every rank fails alike.
        Agreement agreement = parallel::agree(comm_, outcome);
        if (!agreement.ok) {
            throw Error(agreement.failures.front().kind, agreement.failures.front().message);
        }
        files_ = checkpoint::decode_files(comm_.broadcast(std::move(encoded)));
        say(1, "checkpoint: " + files_.tag_dir + " (" + std::to_string(files_.optim_files.size()) +
                   " optimizer files, " + std::to_string(files_.model_files.size()) +
                   " model files)");
    }

    void read_metadata() {
        std::vector<checkpoint::InputFileSpec> inputs = checkpoint::checkpoint_inputs(files_);
        WireWriter mine;
        Outcome outcome = parallel::capture([&] {
            for (std::size_t i = static_cast<std::size_t>(comm_.rank()); i < inputs.size();
                 i += static_cast<std::size_t>(comm_.size())) {
                check_signal();
                checkpoint::encode_file_meta(
                    checkpoint::read_file_meta(inputs[i], static_cast<std::uint32_t>(i)), mine);
            }
        });
        Agreement agreement = parallel::agree(comm_, outcome);
        if (!agreement.ok) {
            // Every failing file is reported; the phase fails with all of them.
            std::string message;
            for (const std::string& text : agreement.distinct_messages()) {
                message += (message.empty() ? "" : "\n") + text;
            }
            throw Error(agreement.failures.front().kind, message);
        }
        std::vector<std::vector<std::byte>> all = comm_.all_gather(mine.bytes());
        std::vector<checkpoint::FileMeta> metas(inputs.size());
        for (std::size_t rank = 0; rank < all.size(); ++rank) {
            WireReader in(all[rank], "file metadata");
            for (std::size_t i = rank; i < inputs.size(); i += all.size()) {
                metas[i] = checkpoint::decode_file_meta(in);
            }
            in.expect_end();
        }
        meta_ = checkpoint::assemble_checkpoint_meta(files_, std::move(metas));
        say(0, "ZeRO stage " + std::to_string(meta_.zero_stage) + ", world size " +
                   std::to_string(meta_.world_size) +
                   (meta_.ds_version.empty() ? "" : ", DeepSpeed " + meta_.ds_version));
        for (const std::string& note : meta_.notes)
            say(1, "note: " + note);
    }

    void plan() {
        plan::PlanOptions plan_options;
        plan_options.dtype = to_dtype(options_.dtype);
        plan_options.cast_all_buffers = options_.cast_all_buffers;
        plan_options.keep_frozen_dtype = options_.keep_frozen_dtype;
        plan_options.exclude_frozen = options_.exclude_frozen;
        plan_options.stage1_frozen = options_.stage1_frozen == Stage1FrozenOption::kSkip
                                         ? plan::Stage1Frozen::kSkip
                                         : plan::Stage1Frozen::kEmit;
        plan::ConsolidationPlan consolidation = plan::plan_consolidation(meta_, plan_options);
        for (const std::string& warning : consolidation.warnings)
            say(0, "warning: " + warning);
        for (const std::string& note : consolidation.notes)
            say(1, "note: " + note);

        plan::SelectionOptions selection{options_.include, options_.exclude,
                                         options_.strip_prefixes, options_.untie};
        plan_ = plan::select_tensors(consolidation.plan, selection);
        if (options_.verbosity >= 2) {
            print_plan();
        }
        output::OutputPlanOptions output_options{to_format(options_.format),
                                                 options_.max_shard_size};
        outputs_ = output::plan_outputs(plan_, output_options);

        output::LayoutOptions layout_options;
        layout_options.hdf5_bf16_as_float = options_.hdf5_bf16_float;
        layout_options.writer_version = kVersion;
        layout_options.source_checkpoint = files_.tag_dir;
        std::vector<plan::FileWork> work;
        for (std::uint32_t f = 0; f < outputs_.files.size(); ++f) {
            layouts_.push_back(output::layout_output_file(plan_, outputs_, f, layout_options));
            plan::FileWork file;
            for (const output::TensorSlot& slot : layouts_.back().slots)
                file.slot_bytes.push_back(slot.length);
            work.push_back(std::move(file));
        }
        ownership_ = plan::assign_ownership(work, static_cast<std::uint32_t>(comm_.size()));

        dir_request_.output_dir = options_.output_dir;
        dir_request_.format = to_format(options_.format);
        dir_request_.index_name = outputs_.index_name;
        dir_request_.run_identity = run_identity();
        dir_request_.overwrite = options_.overwrite;
        dir_request_.resume = options_.resume;
        dir_request_.space_check = options_.space_check;
        for (const output::OutputFileLayout& layout : layouts_) {
            PlannedOutput planned;
            planned.name = layout.name;
            planned.size = layout.size;
            if (!layout.fixed.empty() && layout.fixed.front().offset == 0) {
                planned.header_length = layout.fixed.front().bytes.size();
                planned.header_crc32 = crc32_of(layout.fixed.front().bytes);
            }
            dir_request_.files.push_back(planned);
        }
        std::uint64_t data = 0;
        for (const auto& file : outputs_.files)
            data += file.data_bytes;
        say(0, std::to_string(plan_.tensors.size()) + " tensors, " +
                   std::to_string(outputs_.files.size()) + " " + format_name(outputs_.format) +
                   " file(s), " + ProgressPrinter::format_bytes(data) + " on " +
                   std::to_string(comm_.size()) + " rank(s)");
    }

    // -d/--debug: one line per tensor, as zero_to_fp32 --debug prints them.
    void print_plan() const {
        if (!comm_.is_root())
            return;
        static const char* kRoles[] = {"buffer", "frozen", "trainable", "tied"};
        for (const plan::PlannedTensor& tensor : plan_.tensors) {
            std::string shape;
            for (std::uint64_t dim : tensor.shape)
                shape += (shape.empty() ? "" : ", ") + std::to_string(dim);
            std::string source =
                tensor.is_alias()
                    ? "alias of " + plan_.tensors[static_cast<std::size_t>(tensor.alias_of)].name
                    : std::to_string(tensor.extents.size()) + " extent(s)";
            std::fprintf(
                stderr, "%s full shape: (%s) unpartitioned numel %llu  [%s, %s -> %s, %s]\n",
                tensor.name.c_str(), shape.c_str(), static_cast<unsigned long long>(tensor.numel()),
                kRoles[static_cast<int>(tensor.role)],
                std::string(dtype_display_name(tensor.source_dtype)).c_str(),
                std::string(dtype_display_name(tensor.output_dtype)).c_str(), source.c_str());
        }
    }

    // What the manifest must match for --resume to trust an earlier run's files.
    std::string run_identity() const {
        std::ostringstream text;
        text << "checkpoint=" << files_.tag_dir << "\n";
        for (std::size_t i = 0; i < meta_.inputs.size(); ++i) {
            text << "input=" << meta_.inputs[i] << " " << meta_.input_sizes[i] << "\n";
        }
        text << "format=" << format_name(to_format(options_.format))
             << " dtype=" << dtype_display_name(to_dtype(options_.dtype)) << " shard="
             << (options_.max_shard_size ? std::to_string(*options_.max_shard_size) : "none")
             << " cast_all_buffers=" << options_.cast_all_buffers
             << " keep_frozen_dtype=" << options_.keep_frozen_dtype << " stage1_frozen="
             << (options_.stage1_frozen == Stage1FrozenOption::kEmit ? "emit" : "skip")
             << " exclude_frozen=" << options_.exclude_frozen << " untie=" << options_.untie
             << " hdf5_bf16_float=" << options_.hdf5_bf16_float << "\n";
        for (const auto& p : options_.include)
            text << "include=" << p << "\n";
        for (const auto& p : options_.exclude)
            text << "exclude=" << p << "\n";
        for (const auto& p : options_.strip_prefixes)
            text << "strip=" << p << "\n";
        return text.str();
    }

    void inspect_output(bool& verify_only) {
        if (!comm_.is_root())
            return;
        if (options_.verify && !options_.overwrite && !options_.resume && all_outputs_present()) {
            verify_only = true;  // check an existing conversion against the checkpoint
            decision_.skip.assign(layouts_.size(), true);
            return;
        }
        decision_ = inspect_output_dir(dir_request_);
        for (std::size_t i = 0; i < decision_.skip.size(); ++i) {
            if (decision_.skip[i])
                say(0, "resume: " + layouts_[i].name + " is complete, skipped");
        }
    }

    bool all_outputs_present() const {
        for (const output::OutputFileLayout& layout : layouts_) {
            std::string path = options_.output_dir + "/" + layout.name;
            if (!io::is_regular_file(path) || io::file_size(path) != layout.size)
                return false;
        }
        return !outputs_.index_name ||
               io::is_regular_file(options_.output_dir + "/" + *outputs_.index_name);
    }

    void share_decision(bool& verify_only) {
        WireWriter out;
        if (comm_.is_root()) {
            out.boolean(verify_only);
            out.sequence(decision_.skip, [](WireWriter& w, bool skip) { w.boolean(skip); });
        }
        std::vector<std::byte> bytes = comm_.broadcast(out.take());
        WireReader in(bytes, "output decision");
        verify_only = in.boolean();
        std::vector<bool> skip = in.sequence(1, [](WireReader& r) { return r.boolean(); });
        in.expect_end();
        if (skip.size() != layouts_.size())
            in.malformed("one flag per output file");
        decision_.skip = std::move(skip);
    }

    void print_dry_run() const {
        if (!comm_.is_root())
            return;
        std::printf("dry run: %zu tensors in %zu %s file(s), %d rank(s); nothing written\n",
                    plan_.tensors.size(), layouts_.size(), format_name(outputs_.format),
                    comm_.size());
        for (std::uint32_t f = 0; f < layouts_.size(); ++f) {
            std::string owners;
            for (const plan::WriteTask& task : ownership_.tasks) {
                if (task.file == f)
                    owners += (owners.empty() ? "" : ",") + std::to_string(task.rank);
            }
            std::printf("  %-40s %14llu bytes  %4zu tensors  rank %s%s\n", layouts_[f].name.c_str(),
                        static_cast<unsigned long long>(layouts_[f].size),
                        outputs_.files[f].tensors.size(), owners.c_str(),
                        decision_.skip[f] ? "  (complete, skipped)" : "");
        }
        if (outputs_.index_name)
            std::printf("  %s\n", outputs_.index_name->c_str());
        std::vector<std::uint64_t> reads(plan_.inputs.size(), 0);
        for (const output::OutputFile& file : outputs_.files) {
            for (std::uint32_t t : file.tensors) {
                if (plan_.tensors[t].is_alias())
                    continue;
                for (const plan::SourceExtent& extent : plan_.tensors[t].extents)
                    reads[extent.file] += extent.length;
            }
        }
        std::printf("bytes to read per input file:\n");
        for (std::size_t i = 0; i < reads.size(); ++i) {
            std::printf("  %-60s %14llu of %llu\n", plan_.inputs[i].path.c_str(),
                        static_cast<unsigned long long>(reads[i]),
                        static_cast<unsigned long long>(plan_.inputs[i].size));
        }
    }

    ExecuteContext context() const {
        ExecuteContext context;
        context.plan = &plan_;
        context.outputs = &outputs_;
        context.layouts = &layouts_;
        context.ownership = &ownership_;
        context.skip = &decision_.skip;
        context.output_dir = options_.output_dir;
        context.rank = comm_.rank();
        return context;
    }

    io::CopyOptions copy_options() const {
        io::CopyOptions copy;
        copy.backend = to_backend(options_.io);
        copy.buffer_size = static_cast<std::size_t>(options_.buffer_size);
        return copy;
    }

    bool execute() {
        ExecuteContext ctx = context();
        io::InputFiles inputs(plan_.inputs, io::InputFiles::default_capacity());
        parallel::PeerChannel channel(comm_);
        std::uint64_t total = 0;
        for (const plan::WriteTask& task : ownership_.tasks) {
            if (!decision_.skip[task.file])
                total += task.bytes;
        }
        bool tty = ::isatty(STDERR_FILENO) == 1;
        bool enabled = comm_.is_root() && options_.verbosity >= 0 &&
                       options_.progress != ProgressOption::kNever &&
                       (options_.progress == ProgressOption::kAlways || total > 0);
        ProgressPrinter printer(stderr, enabled, tty);
        printer.start(total);
        std::uint64_t done = 0;
        io::CopyOptions copy = copy_options();
        copy.on_progress = [&](std::uint64_t bytes) {
            done += bytes;
            check_signal();
            if (channel.peer_failed())
                throw parallel::StoppedByPeer{};
            if (comm_.is_root()) {
                printer.update(channel.total_progress(done));
            } else {
                channel.report_progress(done);
            }
        };
        ExecuteReport report;
        Outcome outcome = parallel::capture([&] {
            check_signal();
            execute_tasks(ctx, inputs, copy, report);
        });
        if (outcome.kind == parallel::OutcomeKind::kFailed) {
            channel.announce_failure();
        }
        if (!comm_.is_root())
            channel.report_progress(done, true);
        comm_.quiet_barrier([&] {
            if (comm_.is_root())
                printer.update(channel.total_progress(done));
        });
        channel.drain();
        if (comm_.is_root())
            printer.finish(channel.total_progress(done));
        peak_open_inputs_ = inputs.peak_open();

        bool ok = agreed("execute", outcome);
        // Every rank's finished files and shared-file CRCs, for the report or the tails.
        std::vector<std::uint32_t> completed = gather_completed(report.completed_files);
        std::vector<SlotCrc> crcs = gather_crcs(report.shared_crcs);
        if (ok) {
            ok = agreed("finalize", parallel::capture([&] {
                            for (const plan::WriteTask& task : ownership_.tasks) {
                                if (task.lead && static_cast<int>(task.rank) == comm_.rank() &&
                                    !decision_.skip[task.file] &&
                                    ownership_.tasks_per_file[task.file] > 1) {
                                    finalize_split_file(ctx, task.file, crcs);
                                    completed.push_back(task.file);
                                }
                            }
                        }));
        }
        if (!ok) {
            remove_temp_files(report);
            for (const plan::WriteTask& task : ownership_.tasks) {
                // Leads of shared files also clean the temp files other ranks opened.
                if (task.lead && static_cast<int>(task.rank) == comm_.rank() &&
                    ownership_.tasks_per_file[task.file] > 1) {
                    try {
                        io::remove_file(temp_path(options_.output_dir, layouts_[task.file].name));
                    } catch (...) {
                    }
                }
            }
            report_completed(gather_completed(completed));
        }
        return ok;
    }

    std::vector<std::uint32_t> gather_completed(const std::vector<std::uint32_t>& mine) const {
        WireWriter out;
        out.sequence(mine, [](WireWriter& w, std::uint32_t file) { w.u32(file); });
        std::vector<std::uint32_t> all;
        for (const auto& bytes : comm_.all_gather(out.bytes())) {
            WireReader in(bytes, "completed files");
            for (std::uint32_t file : in.sequence(4, [](WireReader& r) { return r.u32(); }))
                all.push_back(file);
            in.expect_end();
        }
        std::sort(all.begin(), all.end());
        all.erase(std::unique(all.begin(), all.end()), all.end());
        return all;
    }

    std::vector<SlotCrc> gather_crcs(const std::vector<SlotCrc>& mine) const {
        WireWriter out;
        out.sequence(mine, [](WireWriter& w, const SlotCrc& crc) {
            w.u32(crc.file);
            w.u32(crc.slot);
            w.u32(crc.crc);
        });
        std::vector<SlotCrc> all;
        for (const auto& bytes : comm_.all_gather(out.bytes())) {
            WireReader in(bytes, "slot CRCs");
            for (const SlotCrc& crc : in.sequence(12, [](WireReader& r) {
                     SlotCrc value;
                     value.file = r.u32();
                     value.slot = r.u32();
                     value.crc = r.u32();
                     return value;
                 }))
                all.push_back(crc);
            in.expect_end();
        }
        return all;
    }

    void report_completed(const std::vector<std::uint32_t>& completed) {
        completed_after_failure_.clear();
        for (std::size_t f = 0; f < layouts_.size(); ++f) {
            bool done =
                decision_.skip[f] || std::binary_search(completed.begin(), completed.end(), f);
            if (done)
                completed_after_failure_.push_back(layouts_[f].name);
        }
        if (comm_.is_root() && options_.verbosity >= -1) {
            std::fprintf(
                stderr,
                "zero2fp32-mpi: no index written; %zu of %zu output file(s) are complete%s\n",
                completed_after_failure_.size(), layouts_.size(),
                completed_after_failure_.empty() ? "" : " (rerun with --resume to finish):");
            for (const std::string& name : completed_after_failure_)
                std::fprintf(stderr, "  %s\n", name.c_str());
        }
    }

    void write_index() {
        if (!comm_.is_root())
            return;
        // Seen from rank 0: catches an OUT_DIR that is not shared between nodes.
        for (const output::OutputFileLayout& layout : layouts_) {
            std::string path = options_.output_dir + "/" + layout.name;
            if (!io::is_regular_file(path)) {
                throw_output_error("'" + path +
                                   "' was written by another rank but is not visible on rank 0: is "
                                   "the output directory on a file system shared by all nodes?");
            }
            if (io::file_size(path) != layout.size) {
                throw_output_error("'" + path + "' has " + std::to_string(io::file_size(path)) +
                                   " bytes, expected " + std::to_string(layout.size));
            }
        }
        if (outputs_.index_name) {
            io::write_file_atomically(options_.output_dir + "/" + *outputs_.index_name,
                                      outputs_.index_json);
        }
        if (options_.copy_hf_files) {
            for (const std::string& name : checkpoint::find_hf_side_files(files_.checkpoint_dir)) {
                std::string target = options_.output_dir + "/" + name;
                if (io::path_exists(target) && !options_.overwrite && !options_.resume) {
                    say(0, "warning: not copying " + name + ": already in the output directory");
                    continue;
                }
                io::write_file_atomically(
                    target, io::read_small_file(files_.checkpoint_dir + "/" + name, 256u << 20));
                say(1, "copied " + name);
            }
        }
        io::remove_file(options_.output_dir + "/" + kManifestName);
        io::sync_directory(options_.output_dir);
    }

    bool verify() {
        ExecuteContext ctx = context();
        io::InputFiles inputs(plan_.inputs, io::InputFiles::default_capacity());
        std::vector<std::string> mismatches;
        Outcome outcome = parallel::capture([&] {
            mismatches = verify_tasks(ctx, inputs, copy_options());
            if (comm_.is_root() && outputs_.index_name) {
                std::string path = options_.output_dir + "/" + *outputs_.index_name;
                if (io::read_small_file(path, 1u << 30) != outputs_.index_json) {
                    mismatches.push_back(*outputs_.index_name +
                                         ": differs from the index of this plan");
                }
            }
            if (!mismatches.empty()) {
                std::string message =
                    "verification failed: " + std::to_string(mismatches.size()) + " mismatch(es)";
                for (const std::string& line : mismatches)
                    message += "\n  " + line;
                throw Error(ErrorKind::kInput, message);
            }
        });
        bool ok = agreed("verify", outcome);
        if (ok)
            say(0, "verify: every output byte matches the checkpoint");
        return ok;
    }

    void write_summary(ExitCode code) {
        io::IoCounters counters = io::io_counters();
        std::uint64_t bytes_read = comm_.sum(counters.bytes_read);
        std::uint64_t bytes_written = comm_.sum(counters.bytes_written);
        std::uint64_t peak_rss = comm_.max(peak_rss_bytes());
        std::uint64_t peak_open = comm_.max(peak_open_inputs_);
        if (!comm_.is_root())
            return;
        double seconds = std::chrono::duration<double>(Clock::now() - start_).count();
        std::uint64_t output_bytes = 0;
        for (const auto& layout : layouts_)
            output_bytes += layout.size;
        double rate = seconds > 0 ? static_cast<double>(output_bytes) / seconds / 1e9 : 0.0;
        if (code == ExitCode::kOk && !options_.dry_run) {
            say(0, "done: " + std::to_string(plan_.tensors.size()) + " tensors, " +
                       std::to_string(layouts_.size()) + " file(s), " +
                       ProgressPrinter::format_bytes(output_bytes) + " in " +
                       ProgressPrinter::format_duration(seconds) + " (" +
                       std::to_string(rate).substr(0, 5) + " GB/s); read " +
                       ProgressPrinter::format_bytes(bytes_read) + ", wrote " +
                       ProgressPrinter::format_bytes(bytes_written) + ", peak RSS " +
                       ProgressPrinter::format_bytes(peak_rss) + " per rank");
        }
        if (options_.summary_json.empty())
            return;
        nlohmann::ordered_json json;
        json["status"] = code == ExitCode::kOk ? "ok" : "error";
        json["exit_code"] = static_cast<int>(code);
        nlohmann::ordered_json errors = nlohmann::ordered_json::array();
        if (failure_) {
            for (const auto& failure : failure_->failures) {
                errors.push_back({{"rank", failure.rank}, {"message", failure.message}});
            }
        }
        json["errors"] = errors;
        json["complete_files_on_error"] = completed_after_failure_;
        json["version"] = kVersion;
        json["checkpoint"] = files_.tag_dir;
        json["tag"] = files_.tag;
        json["zero_stage"] = meta_.zero_stage;
        json["world_size"] = meta_.world_size;
        json["ds_version"] = meta_.ds_version;
        json["ranks"] = comm_.size();
        json["options"] = {{"format", format_name(to_format(options_.format))},
                           {"dtype", std::string(dtype_display_name(to_dtype(options_.dtype)))},
                           {"max_shard_size", options_.max_shard_size
                                                  ? nlohmann::ordered_json(*options_.max_shard_size)
                                                  : nlohmann::ordered_json("none")},
                           {"io", io_name(options_.io)},
                           {"buffer_size", options_.buffer_size},
                           {"cast_all_buffers", options_.cast_all_buffers},
                           {"keep_frozen_dtype", options_.keep_frozen_dtype},
                           {"stage1_frozen",
                            options_.stage1_frozen == Stage1FrozenOption::kEmit ? "emit" : "skip"},
                           {"exclude_frozen", options_.exclude_frozen},
                           {"untie", options_.untie},
                           {"dry_run", options_.dry_run},
                           {"resume", options_.resume},
                           {"verify", options_.verify}};
        json["tensors"] = plan_.tensors.size();
        nlohmann::ordered_json files = nlohmann::ordered_json::array();
        for (std::size_t f = 0; f < layouts_.size(); ++f) {
            files.push_back({{"name", layouts_[f].name},
                             {"size", layouts_[f].size},
                             {"skipped", f < decision_.skip.size() && decision_.skip[f]}});
        }
        json["files"] = files;
        json["index"] = outputs_.index_name ? nlohmann::ordered_json(*outputs_.index_name)
                                            : nlohmann::ordered_json(nullptr);
        json["output_bytes"] = output_bytes;
        json["bytes_read"] = bytes_read;
        json["bytes_written"] = bytes_written;
        json["wall_seconds"] = seconds;
        json["gb_per_s"] = rate;
        json["peak_rss_bytes"] = peak_rss;
        json["peak_open_inputs"] = peak_open;
        nlohmann::ordered_json phases = nlohmann::ordered_json::object();
        for (const auto& [name, secs] : phase_seconds_)
            phases[name] = phases.contains(name) ? phases[name].get<double>() + secs : secs;
        json["phase_seconds"] = phases;
        try {
            io::write_file_atomically(options_.summary_json, json.dump(2) + "\n");
        } catch (const Error& error) {
            std::fprintf(stderr, "zero2fp32-mpi: warning: cannot write the summary: %s\n",
                         error.what());
        }
    }

    const ConvertOptions& options_;
    Communicator comm_;
    Clock::time_point start_;
    Clock::time_point phase_start_;
    std::vector<std::pair<std::string, double>> phase_seconds_;
    std::optional<Agreement> failure_;
    std::vector<std::string> completed_after_failure_;

    checkpoint::CheckpointFiles files_;
    checkpoint::CheckpointMeta meta_;
    plan::TensorPlan plan_;
    output::OutputPlan outputs_;
    std::vector<output::OutputFileLayout> layouts_;
    plan::Ownership ownership_;
    OutputDirRequest dir_request_;
    OutputDirDecision decision_;
    std::uint64_t peak_open_inputs_ = 0;
};

}  // namespace
}  // namespace z2f::driver

namespace z2f {

ExitCode run_conversion(const ConvertOptions& options, MPI_Comm comm) {
    io::install_signal_handlers();
    try {
        return driver::Conversion(options, comm).run();
    } catch (...) {
        // Unreachable by design (every phase is captured); never let an exception escape a
        // collective caller.
        std::fprintf(stderr, "zero2fp32-mpi: internal error outside a phase\n");
        return ExitCode::kConversionError;
    }
}

}  // namespace z2f
