#include "run/run_plan.hpp"

#include <algorithm>
#include <optional>
#include <set>
#include <sstream>

#include "common/crc32.hpp"
#include "common/errors.hpp"
#include "output/output_plan.hpp"
#include "plan/consolidation.hpp"
#include "plan/selection.hpp"
#include "run/universal_run_plan.hpp"

namespace z2f::run {
namespace {

// Files in torch's legacy format carry no CRCs (docs/deepspeed-format.md §2.5), so the input
// check has nothing to check their bytes against: said once per run, counting the files.
std::optional<std::string> legacy_inputs_warning(const plan::TensorPlan& tensors) {
    std::set<std::uint32_t> files;
    for (const InputRecord& record : tensors.records) {
        if (record.format_has_no_crc)
            files.insert(record.file);
    }
    if (files.empty())
        return std::nullopt;
    return std::to_string(files.size()) +
           " input file(s) are in torch's legacy (non-zip) format, which carries no CRC-32s: "
           "the input check cannot check the bytes read from them (the first: '" +
           tensors.inputs.at(*files.begin()).path + "')";
}

// Everything that shapes the output bytes, and the inputs they come from.
std::string run_identity(const TensorSource& source, const Options& options) {
    std::ostringstream text;
    text << "checkpoint=" << source.checkpoint.tag_dir << "\n";
    for (const InputFile& input : source.tensors.inputs) {
        text << "input=" << input.path << " " << input.size << "\n";
    }
    text << "format=" << enum_name(options.format) << " dtype=" << dtype_display_name(options.dtype)
         << " shard=" << (options.max_shard_size ? std::to_string(*options.max_shard_size) : "none")
         << " cast_all_buffers=" << options.cast_all_buffers
         << " keep_frozen_dtype=" << options.keep_frozen_dtype
         << " stage1_frozen=" << enum_name(options.stage1_frozen)
         << " exclude_frozen=" << options.exclude_frozen << " untie=" << options.untie
         << " hdf5_bf16_float=" << (options.hdf5_bf16 == Hdf5Bf16::kFloat) << "\n";
    for (const auto& pattern : options.include)
        text << "include=" << pattern << "\n";
    for (const auto& pattern : options.exclude)
        text << "exclude=" << pattern << "\n";
    for (const auto& prefix : options.strip_prefixes)
        text << "strip=" << prefix << "\n";
    text << source.identity;
    return text.str();
}

// The copy engines execute flat extents and means of whole replicas; a tensor whose pieces
// average only some of its bytes (no layout makes one today) has neither.
void require_executable(const plan::TensorPlan& tensors, const std::string& tag_dir) {
    for (const plan::PlannedTensor& tensor : tensors.tensors) {
        if (!tensor.pieces.empty() && !plan::flattenable(tensor.pieces) &&
            tensor.replicas.empty()) {
            throw_unsupported(tag_dir, "parameter '" + tensor.name +
                                           "': only some of its bytes are averaged over the TP "
                                           "ranks, which the copy engines cannot write; use "
                                           "--tp-replicated check or first");
        }
    }
}

}  // namespace

OutputFileRecord make_file_record(output::OutputFileLayout layout,
                                  std::vector<std::uint32_t> tensors, std::uint64_t data_bytes) {
    OutputFileRecord record;
    record.layout = std::move(layout);
    record.tensors = std::move(tensors);
    record.data_bytes = data_bytes;
    const auto& fixed = record.layout.fixed;
    if (!fixed.empty() && fixed.front().offset == 0) {
        record.header_length = fixed.front().bytes.size();
        record.header_crc32 = crc32_of(fixed.front().bytes);
    }
    return record;
}

void adopt_tasks(RunPlan& run, std::vector<plan::WriteTask> tasks, std::uint64_t block_size) {
    run.tasks = std::move(tasks);
    std::vector<std::uint64_t> next_byte(run.files.size(), 0);
    for (std::uint32_t t = 0; t < run.tasks.size(); ++t) {
        const plan::WriteTask& task = run.tasks[t];
        OutputFileRecord& file = run.files.at(task.file);
        if (file.task_count == 0)
            file.first_task = t;
        ++file.task_count;
        // The executors rely on these: ranges tile the file in order, and the cuts of a shared
        // file are block multiples (no two ranks write one block).
        if (task.begin != next_byte[task.file] || task.end < task.begin ||
            task.end > file.layout.size || (task.begin % block_size != 0) ||
            task.lead != (task.begin == 0)) {
            throw_internal_error("write task " + std::to_string(t) + " of '" + file.name() +
                                 "' does not continue its file at a block boundary");
        }
        next_byte[task.file] = task.end;
    }
    for (std::size_t f = 0; f < run.files.size(); ++f) {
        if (run.files[f].task_count == 0 || next_byte[f] != run.files[f].layout.size)
            throw_internal_error("the write tasks do not cover '" + run.files[f].name() + "'");
    }
}

plan::FileWork file_work(const plan::TensorPlan& tensors, const output::OutputFileLayout& layout) {
    plan::FileWork work;
    work.size = layout.size;
    for (const output::TensorSlot& slot : layout.slots) {
        const auto item =
            static_cast<std::uint32_t>(dtype_size(tensors.tensors.at(slot.tensor).output_dtype));
        work.slots.push_back({slot.offset, slot.length, item});
    }
    return work;
}

void validate_options(const Options& options) {
    if (options.dtype != DType::kF32 && options.dtype != DType::kBF16 &&
        options.dtype != DType::kF16) {
        throw_usage_error("the output dtype must be " + enum_choices<DType>() + " (got " +
                          std::string(dtype_display_name(options.dtype)) + ")");
    }
    // The command line keeps to 64KiB..16GiB; the library only needs room for a few elements
    // (the tests exercise odd small buffers).
    if (options.buffer_size < 256 || options.buffer_size > (std::uint64_t{16} << 30)) {
        throw_usage_error("the buffer size must be between 256 bytes and 16GiB (got " +
                          std::to_string(options.buffer_size) + " bytes)");
    }
    if (options.block_size < 4096 || options.block_size > (std::uint64_t{1} << 30) ||
        options.block_size % 4096 != 0) {
        throw_usage_error("the block size must be a multiple of 4KiB between 4KiB and 1GiB (got " +
                          std::to_string(options.block_size) + " bytes)");
    }
    if (options.overwrite && options.resume) {
        throw_usage_error("--overwrite starts over and --resume continues: give one of them");
    }
    if (options.dry_run && options.verify) {
        throw_usage_error("--dry-run writes and reads nothing, so it cannot --verify");
    }
    if (options.verify && (options.overwrite || options.resume)) {
        throw_usage_error(std::string("--verify only reads OUT_DIR and never changes it; ") +
                          (options.overwrite ? "--overwrite" : "--resume") +
                          " asks to write: convert first, then --verify");
    }
    if (options.format == OutputFormat::kUniversal)
        validate_universal_options(options);
}

std::vector<const plan::WriteTask*> RunPlan::tasks_of(std::uint32_t rank) const {
    std::vector<const plan::WriteTask*> mine;
    for (const plan::WriteTask& task : tasks) {
        if (task.rank == rank)
            mine.push_back(&task);
    }
    return mine;
}

const plan::PlannedTensor& RunPlan::source_of(std::uint32_t tensor) const {
    const plan::PlannedTensor* source = &tensors.tensors.at(tensor);
    if (source->is_alias())
        source = &tensors.tensors.at(static_cast<std::size_t>(source->alias_of));
    return *source;
}

std::uint64_t RunPlan::bytes_to_write() const noexcept {
    std::uint64_t bytes = 0;
    for (const OutputFileRecord& file : files) {
        if (!file.skip)
            bytes += file.layout.size;
    }
    return bytes;
}

std::uint64_t RunPlan::output_bytes() const noexcept {
    std::uint64_t bytes = 0;
    for (const OutputFileRecord& file : files)
        bytes += file.layout.size;
    return bytes;
}

std::vector<std::uint64_t> RunPlan::bytes_to_read() const {
    std::vector<std::uint64_t> reads(tensors.inputs.size(), 0);
    for (const OutputFileRecord& file : files) {
        if (file.skip)
            continue;
        for (const output::TensorSlot& slot : file.layout.slots) {
            const plan::PlannedTensor& source = source_of(slot.tensor);
            for (const SourceExtent& extent : plan::source_extents(source))
                reads.at(extent.file) += extent.length;
            for (const std::vector<SourceExtent>& replica : source.replicas) {
                for (const SourceExtent& extent : replica)
                    reads.at(extent.file) += extent.length;
            }
        }
    }
    return reads;
}

void RunPlan::apply_resume(const std::vector<bool>& skip) {
    if (skip.size() != files.size())
        throw_internal_error("resume decision for " + std::to_string(skip.size()) + " of " +
                             std::to_string(files.size()) + " files");
    for (std::size_t f = 0; f < files.size(); ++f)
        files[f].skip = skip[f];
}

RunPlan build_run_plan(const checkpoint::CheckpointMeta& meta, const RunSettings& settings) {
    validate_options(settings.options);
    return build_run_plan(data_parallel_source(meta, settings.options), settings);
}

RunPlan build_run_plan(const TensorSource& source, const RunSettings& settings) {
    const Options& options = settings.options;
    validate_options(options);
    RunPlan run;
    run.checkpoint = source.checkpoint;
    run.zero_stage = source.zero_stage;
    run.world_size = source.world_size;
    run.ds_version = source.ds_version;
    run.ranks = settings.ranks;
    run.format = options.format;
    run.notes = source.notes;
    run.warnings = source.warnings;
    if (options.input_crc) {
        if (std::optional<std::string> warning = legacy_inputs_warning(source.tensors))
            run.warnings.push_back(std::move(*warning));
    }
    run.parallel = source.parallel;
    if (options.format == OutputFormat::kUniversal) {
        if (!source.universal)
            throw_internal_error("a universal run without the universal plan");
        plan_universal_run(*source.universal, settings, run);
        run.identity = run_identity(source, options);
        return run;
    }

    plan::SelectionOptions selection{options.include, options.exclude, options.strip_prefixes,
                                     options.untie};
    run.tensors = plan::select_tensors(source.tensors, selection);
    for (const std::string& prefix : plan::unmatched_prefixes(source.tensors, selection))
        run.warnings.push_back("--strip-prefix '" + prefix + "' matches no tensor name");
    require_executable(run.tensors, source.checkpoint.tag_dir);

    output::OutputPlan outputs = output::plan_outputs(
        run.tensors, output::OutputPlanOptions{options.format, options.max_shard_size});
    run.index_name = outputs.index_name;
    run.index_json = outputs.index_json;

    output::LayoutOptions layout_options;
    layout_options.hdf5_bf16_as_float = options.hdf5_bf16 == Hdf5Bf16::kFloat;
    layout_options.writer_version = settings.writer_version;
    layout_options.source_checkpoint = source.checkpoint.tag_dir;
    std::vector<plan::FileWork> work;
    for (std::uint32_t f = 0; f < outputs.files.size(); ++f) {
        run.files.push_back(
            make_file_record(output::layout_output_file(run.tensors, outputs, f, layout_options),
                             outputs.files[f].tensors, outputs.files[f].data_bytes));
        work.push_back(file_work(run.tensors, run.files.back().layout));
    }

    adopt_tasks(run, plan::assign_ownership(work, settings.ranks, options.block_size).tasks,
                options.block_size);
    run.identity = run_identity(source, options);
    return run;
}

ConversionPlan conversion_plan_view(const RunPlan& run) {
    ConversionPlan view;
    view.checkpoint = run.checkpoint.tag_dir;
    view.tag = run.checkpoint.tag;
    view.zero_stage = run.zero_stage;
    view.world_size = run.world_size;
    view.ds_version = run.ds_version;
    view.format = run.format;
    view.index = run.index_name;
    view.warnings = run.warnings;
    view.parallel = run.parallel;
    std::vector<std::string> file_of(run.tensors.tensors.size());
    for (const OutputFileRecord& file : run.files) {
        view.files.push_back({file.name(), file.layout.size});
        for (std::uint32_t tensor : file.tensors)
            file_of.at(tensor) = file.name();
    }
    for (std::size_t i = 0; i + run.copied_pieces < run.tensors.tensors.size(); ++i) {
        const plan::PlannedTensor& tensor = run.tensors.tensors[i];
        ConversionPlan::Tensor entry;
        entry.name = tensor.name;
        entry.dtype = tensor.output_dtype;
        entry.source_dtype = tensor.source_dtype;
        entry.shape = tensor.shape;
        entry.role = tensor.role;
        entry.merge = tensor.merge;
        if (tensor.is_alias()) {
            const auto owner = static_cast<std::size_t>(tensor.alias_of);
            entry.alias_of = run.tensors.tensors.at(owner).name;
            // safetensors writes an alias nowhere: its data is in the owner's file.
            entry.file = file_of[i].empty() ? file_of.at(owner) : file_of[i];
        } else {
            entry.file = file_of[i];
        }
        view.tensors.push_back(std::move(entry));
    }
    return view;
}

}  // namespace z2f::run
