#include "run/universal_run_plan.hpp"

#include <algorithm>
#include <unordered_map>

#include "common/errors.hpp"
#include "output/universal_layout.hpp"
#include "plan/unit_ownership.hpp"
#include "plan/universal_plan.hpp"

namespace z2f::run {
namespace {

// Below this a byte copy is not worth cutting: each piece costs an open, a sync and an
// agreement before the rename.
constexpr std::uint64_t kMinCopyPiece = std::uint64_t{64} << 20;

void refuse(const char* option) {
    throw_usage_error(std::string(option) +
                      " shapes Hugging Face output; it does not apply to --format universal, "
                      "which holds every trainable parameter whole, in float32, with its Adam "
                      "moments");
}

OutputFileRecord known_bytes_record(output::UniversalOutputFile& file) {
    output::OutputFileLayout layout;
    layout.name = file.path;
    layout.format = OutputFormat::kUniversal;
    layout.size = file.bytes.size();
    layout.fixed.push_back({0, std::move(file.bytes)});
    return make_file_record(std::move(layout), {}, 0);
}

// A byte copy of input `file.source`: at most `pieces` slots, each a kU8 "tensor" of one
// extent; pieces start at multiples of `block_size`, so that the ranks sharing the copy never
// write the same block (plan/ownership.hpp).
OutputFileRecord copy_record(const output::UniversalOutputFile& file, std::uint64_t pieces,
                             std::uint64_t block_size, plan::TensorPlan& tensors) {
    output::OutputFileLayout layout;
    layout.name = file.path;
    layout.format = OutputFormat::kUniversal;
    layout.size = file.size;
    std::vector<std::uint32_t> indices;
    const std::uint64_t even = pieces == 0 ? 0 : (file.size + pieces - 1) / pieces;
    const std::uint64_t piece = (even + block_size - 1) / block_size * block_size;
    const bool whole = piece >= file.size;
    for (std::uint64_t offset = 0; offset < file.size; offset += piece) {
        const std::uint64_t length = std::min(piece, file.size - offset);
        plan::PlannedTensor bytes;
        bytes.name = whole ? file.path
                           : file.path + " [" + std::to_string(offset) + ", " +
                                 std::to_string(offset + length) + ")";
        bytes.shape = {length};
        bytes.source_dtype = DType::kU8;
        bytes.output_dtype = DType::kU8;
        bytes.role = TensorRole::kBuffer;
        bytes.extents = {{file.source, offset, length}};
        const auto index = static_cast<std::uint32_t>(tensors.tensors.size());
        tensors.tensors.push_back(std::move(bytes));
        layout.slots.push_back({index, offset, length});
        indices.push_back(index);
    }
    return make_file_record(std::move(layout), std::move(indices), file.size);
}

}  // namespace

void validate_universal_options(const Options& options) {
    if (options.dtype != DType::kF32) {
        throw_usage_error(
            "--format universal writes float32 files (fp32.pt, exp_avg.pt, exp_avg_sq.pt, as "
            "DeepSpeed's loader expects); --dtype does not apply");
    }
    if (options.cast_all_buffers)
        refuse("--cast-all-buffers (or --parity)");
    if (options.keep_frozen_dtype)
        refuse("--keep-frozen-dtype (or --parity)");
    if (options.stage1_frozen != Stage1Frozen::kEmit)
        refuse("--stage1-frozen (or --parity)");
    if (options.exclude_frozen)
        refuse("--exclude_frozen_parameters");
    if (options.untie)
        refuse("--untie");
    if (!options.include.empty() || !options.exclude.empty())
        refuse("--include/--exclude");
    if (!options.strip_prefixes.empty())
        refuse("--strip-prefix");
    if (options.hdf5_bf16 != Hdf5Bf16::kUint16)
        refuse("--hdf5-bf16");
}

// The files of the universal plan (optimizer_state.pt from the optimizer view) as records, tasks
// and owners.
void plan_universal_run(const UniversalSource& source, const RunSettings& settings, RunPlan& run) {
    plan::UniversalPlan universal = source.plan;
    const checkpoint::CheckpointMeta& optimizer_meta = source.optimizer_meta;
    std::vector<output::UniversalOutputFile> files =
        output::plan_universal_files(optimizer_meta, universal);
    run.tensors = std::move(universal.plan);
    run.warnings.insert(run.warnings.end(), universal.warnings.begin(), universal.warnings.end());
    run.notes.insert(run.notes.end(), universal.notes.begin(), universal.notes.end());
    run.output_folder = output::universal_tag_folder(universal.tag);
    const std::size_t real_tensors = run.tensors.tensors.size();

    // The unit of every file of a parameter: the parameter's index.
    std::unordered_map<std::string, std::uint32_t> unit_of_path;
    constexpr plan::Stream kStreams[] = {plan::Stream::kMaster, plan::Stream::kExpAvg,
                                         plan::Stream::kExpAvgSq};
    for (std::uint32_t p = 0; p < universal.params.size(); ++p) {
        const std::string& name = universal.params[p].name;
        for (plan::Stream stream : kStreams)
            unit_of_path.emplace(output::universal_tensor_path(run.output_folder, name, stream), p);
        unit_of_path.emplace(output::universal_step_path(run.output_folder, name), p);
    }
    std::vector<plan::OwnershipUnit> units(universal.params.size());
    auto add_task = [&](std::size_t unit, std::uint64_t begin, std::uint64_t end,
                        std::uint32_t slot_begin, std::uint32_t slot_end, std::uint64_t bytes,
                        std::uint64_t weight) {
        plan::WriteTask task;
        task.file = static_cast<std::uint32_t>(run.files.size() - 1);
        task.begin = begin;
        task.end = end;
        task.slot_begin = slot_begin;
        task.slot_end = slot_end;
        task.bytes = bytes;
        units.at(unit).tasks.push_back(task);
        units.at(unit).weight += weight;
    };
    auto own_unit = [&] {
        units.emplace_back();
        return units.size() - 1;
    };

    for (output::UniversalOutputFile& file : files) {
        if (file.path == output::kLatestUniversalFile) {
            run.index_name = file.path;
            run.index_json.assign(reinterpret_cast<const char*>(file.bytes.data()),
                                  file.bytes.size());
            continue;
        }
        auto param = unit_of_path.find(file.path);
        switch (file.kind) {
            case output::UniversalOutputFile::Kind::kTensor: {
                if (param == unit_of_path.end())
                    throw_internal_error("universal tensor file of no parameter: " + file.path);
                file.layout.format = OutputFormat::kUniversal;
                const output::TensorSlot slot = file.layout.slots.at(0);
                run.files.push_back(
                    make_file_record(std::move(file.layout), {slot.tensor}, slot.length));
                const std::uint64_t size = file.size;
                add_task(param->second, 0, size, 0, 1, slot.length, size);
                break;
            }
            case output::UniversalOutputFile::Kind::kBytes: {
                const std::size_t unit = param != unit_of_path.end() ? param->second : own_unit();
                const std::uint64_t size = file.size;
                run.files.push_back(known_bytes_record(file));
                add_task(unit, 0, size, 0, 0, 0, size);
                break;
            }
            case output::UniversalOutputFile::Kind::kCopy: {
                const std::uint64_t pieces =
                    file.size == 0
                        ? 0
                        : std::clamp<std::uint64_t>((file.size + kMinCopyPiece - 1) / kMinCopyPiece,
                                                    1, settings.ranks);
                run.files.push_back(
                    copy_record(file, pieces, settings.options.block_size, run.tensors));
                const output::OutputFileLayout& layout = run.files.back().layout;
                if (layout.slots.empty())
                    add_task(own_unit(), 0, 0, 0, 0, 0, 0);
                for (std::uint32_t s = 0; s < layout.slots.size(); ++s) {
                    const output::TensorSlot& slot = layout.slots[s];
                    add_task(own_unit(), slot.offset, slot.offset + slot.length, s, s + 1,
                             slot.length, slot.length);
                }
                break;
            }
        }
    }
    if (!run.index_name) {
        throw_internal_error("universal files without latest_universal");
    }
    run.copied_pieces = run.tensors.tensors.size() - real_tensors;

    adopt_tasks(run,
                plan::assign_unit_ownership(units, static_cast<std::uint32_t>(run.files.size()),
                                            settings.ranks)
                    .tasks,
                settings.options.block_size);
    run.notes.push_back("universal checkpoint: " + std::to_string(universal.params.size()) +
                        " parameters, " + std::to_string(run.files.size()) + " files under " +
                        run.output_folder + "/, then " + *run.index_name);
}

}  // namespace z2f::run
