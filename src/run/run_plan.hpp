// One run as a value: everything every rank needs to know before a byte is written.
//
// `build_run_plan` is a pure function of the checkpoint's metadata and the run settings
// (options, rank count): the tensors in output order with their source extents, one record per
// output file (its byte layout, its tensors, its write tasks and their owner ranks, whether
// several ranks share it, its header checksum), the index, and the run's identity. Every rank
// computes the same value; tests build it without MPI. The only part decided later is which
// files an interrupted run already finished (`apply_resume`), and that decision is broadcast.
//
//   files[f].first_task .. + task_count     the tasks of file f in `tasks` (ordered by file,
//                                           then byte range, which they tile); the first one
//                                           is the file's lead: it renames the file when it is
//                                           complete (and writes a shared zip's CRC tail)
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_meta.hpp"
#include "output/output_layout.hpp"
#include "plan/ownership.hpp"
#include "plan/tensor_plan.hpp"
#include "run/tensor_source.hpp"
#include "zero2fp32/options.hpp"
#include "zero2fp32/plan.hpp"

namespace z2f::run {

struct RunSettings {
    Options options;
    std::uint32_t ranks = 1;
    std::string writer_version;  // recorded in HDF5 outputs
};

struct OutputFileRecord {
    output::OutputFileLayout layout;     // name, size, fixed regions, tensor slots
    std::vector<std::uint32_t> tensors;  // plan indices, in the order the file lists them
    std::uint64_t data_bytes = 0;        // unique tensor bytes
    std::uint32_t first_task = 0;
    std::uint32_t task_count = 0;
    // The first fixed region when it starts the file (every format's header): what --resume
    // compares an existing file's first bytes with.
    std::uint64_t header_length = 0;
    std::uint32_t header_crc32 = 0;
    bool skip = false;  // complete from an earlier run: not written again

    const std::string& name() const noexcept { return layout.name; }
    bool is_shared() const noexcept { return task_count > 1; }
};

struct RunPlan {
    checkpoint::CheckpointFiles checkpoint;
    int zero_stage = 0;
    std::uint32_t world_size = 0;
    std::string ds_version;
    std::uint32_t ranks = 1;

    plan::TensorPlan tensors;
    OutputFormat format = OutputFormat::kSafetensors;
    std::vector<OutputFileRecord> files;
    // The file rank 0 writes last, once every rank succeeded and every other file is visible:
    // the index of sharded Hugging Face outputs, latest_universal of universal output.
    std::optional<std::string> index_name;
    std::string index_json;
    // The folder of OUT_DIR (relative) that holds every file but the index, and the run
    // manifest: "<tag>_universal" for universal output, empty (OUT_DIR itself) otherwise.
    std::string output_folder;
    // The last `copied_pieces` entries of tensors.tensors are not tensors: they are byte ranges
    // of input files copied unchanged (universal output's model-states files). The public view
    // lists them as files only.
    std::size_t copied_pieces = 0;
    std::vector<plan::WriteTask> tasks;
    // What a manifest must match for --resume to trust an earlier run's files.
    std::string identity;
    std::vector<std::string> warnings;  // for the user, always
    std::vector<std::string> notes;     // about the checkpoint and the plan (verbose)
    std::optional<ConversionPlan::ParallelGrid> parallel;  // parallel checkpoints only

    // The tasks `rank` owns, in plan order (skipped files included).
    std::vector<const plan::WriteTask*> tasks_of(std::uint32_t rank) const;
    // The index in `tasks` of one of its elements.
    std::uint32_t index_of(const plan::WriteTask& task) const noexcept {
        return static_cast<std::uint32_t>(&task - tasks.data());
    }
    const plan::WriteTask& lead_of(std::uint32_t file) const {
        return tasks.at(files.at(file).first_task);
    }
    bool is_shared(std::uint32_t file) const { return files.at(file).is_shared(); }
    bool owns(std::uint32_t rank, const plan::WriteTask& task) const noexcept {
        return task.rank == rank;
    }
    // The tensor whose bytes fill a slot: the slot's own, or for an alias written out again,
    // its owner's.
    const plan::PlannedTensor& source_of(std::uint32_t tensor) const;
    // Bytes this run writes: every file not skipped.
    std::uint64_t bytes_to_write() const noexcept;
    std::uint64_t output_bytes() const noexcept;
    // Tensor bytes read from each input (indexed like tensors.inputs), skipped files excluded.
    std::vector<std::uint64_t> bytes_to_read() const;

    // Marks the files an earlier run completed; `skip` has one flag per file.
    void apply_resume(const std::vector<bool>& skip);
};

// A record of `layout` holding plan tensors `tensors`; its header (for --resume) is the first
// fixed region when that starts the file.
OutputFileRecord make_file_record(output::OutputFileLayout layout,
                                  std::vector<std::uint32_t> tensors, std::uint64_t data_bytes);

// Takes `tasks` (ordered by file, then range) as the plan's and sets each file's first_task
// and task_count from them; checks that each file's tasks tile it and start at multiples of
// `block_size` (an internal error otherwise).
void adopt_tasks(RunPlan& run, std::vector<plan::WriteTask> tasks, std::uint64_t block_size);

// What ownership knows of a laid-out file: its size, its slots and their element sizes.
plan::FileWork file_work(const plan::TensorPlan& tensors, const output::OutputFileLayout& layout);

// Checks the options alone (before any I/O): contradictions and unsupported values are usage
// errors.
void validate_options(const Options& options);

// From either reader's tensors (tensor_source.hpp).
RunPlan build_run_plan(const TensorSource& source, const RunSettings& settings);
// A data-parallel checkpoint: build_run_plan(data_parallel_source(meta, options), settings).
RunPlan build_run_plan(const checkpoint::CheckpointMeta& meta, const RunSettings& settings);

// The public, read-only view (zero2fp32/plan.hpp).
ConversionPlan conversion_plan_view(const RunPlan& plan);

}  // namespace z2f::run
