// z2f::StateDictReader (zero2fp32/state_dict.hpp): a conversion's reads without its files.
//
// The plan is a RunPlan (run/plan_in_process.hpp) of one safetensors file holding every tensor,
// planned for as many "ranks" as the reader has threads: ownership (plan/ownership.hpp) cuts
// that file into equal stretches, so a read of every tensor splits among the threads as a
// conversion's writes split among ranks, a large tensor included. Each slot part of a stretch
// fills its run of the tensor's memory (run/read_parts.hpp, io/memory_filler.hpp); the input
// CRC check is the conversion's (run/input_check.hpp), its records checked as reads complete
// them (run::CheckProgress).
#include <algorithm>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/crc32.hpp"
#include "common/errors.hpp"
#include "driver/execute/replica_check.hpp"
#include "driver/thread_team.hpp"
#include "io/dtype_convert.hpp"
#include "io/input_files.hpp"
#include "io/memory_advice.hpp"
#include "io/memory_filler.hpp"
#include "run/input_check.hpp"
#include "run/plan_in_process.hpp"
#include "run/read_parts.hpp"
#include "zero2fp32/state_dict.hpp"

namespace z2f {
namespace {

constexpr unsigned kMostThreads = 8;
// Each thread's share of the I/O memory is at least this.
constexpr std::uint64_t kLeastShare = std::uint64_t{1} << 20;

unsigned thread_count(const ReaderSettings& settings) {
    if (settings.threads > 0)
        return settings.threads;
    return std::clamp(std::thread::hardware_concurrency(), 1U, kMostThreads);
}

// Only what shapes the tensors counts: one file of every tensor, whatever was asked for files.
Options reading_options(Options options) {
    options.format = OutputFormat::kSafetensors;
    options.max_shard_size.reset();
    options.overwrite = false;
    options.resume = false;
    options.dry_run = false;
    options.verify = false;
    options.chosen.clear();
    return options;
}

std::string mismatch_message(const std::vector<std::string>& mismatches) {
    if (mismatches.size() == 1)
        return "the copies of a replicated or tied tensor differ: " + mismatches.front();
    std::string message = "the copies of " + std::to_string(mismatches.size()) +
                          " replicated or tied tensors differ:";
    for (const std::string& line : mismatches)
        message += "\n  " + line;
    return message;
}

}  // namespace

struct StateDictReader::State {
    Options options;
    unsigned threads = 1;
    run::RunPlan plan;
    ConversionPlan view;
    std::vector<std::string> paths;
    run::ReadParts parts;
    std::optional<run::InputCheckPlan> check;
    std::optional<run::CheckProgress> progress;
    std::vector<std::uint32_t> piece_crcs;
    // One cache of open inputs per thread (io::InputFiles is not shared between threads).
    std::vector<std::unique_ptr<io::InputFiles>> inputs;
    bool first_read_done = false;
    std::mutex mutex;

    std::size_t share() const {
        return static_cast<std::size_t>(std::max(options.buffer_size / threads, kLeastShare));
    }

    // What one read does, thread by thread.
    struct Work {
        std::vector<std::vector<io::MemoryFill>> fills;    // per thread
        std::vector<std::vector<std::uint32_t>> extra;     // check pieces, per thread
        std::vector<std::uint32_t> parts;                  // read parts, all threads
        std::vector<std::uint32_t> completed;              // checked records it completes
        std::vector<std::vector<std::string>> mismatches;  // replica checks, per thread
    };

    Work plan_work(std::span<const TensorDestination> destinations);
    void read_share(Work& work, unsigned index, const driver::StopFlag& stop);
    void check_completed(const Work& work) const;
};

StateDictReader::State::Work StateDictReader::State::plan_work(
    std::span<const TensorDestination> destinations) {
    Work work;
    work.fills.resize(threads);
    work.extra.resize(threads);
    work.mismatches.resize(threads);
    std::vector<bool> asked(view.tensors.size(), false);
    for (const TensorDestination& destination : destinations) {
        if (destination.tensor >= view.tensors.size())
            throw_usage_error("no tensor " + std::to_string(destination.tensor) +
                              " (the plan has " + std::to_string(view.tensors.size()) + ")");
        const plan::PlannedTensor& tensor = plan.tensors.tensors[destination.tensor];
        if (asked[destination.tensor])
            throw_usage_error("tensor '" + tensor.name + "' is asked for twice");
        asked[destination.tensor] = true;
        const plan::PlannedTensor& stored =
            plan.source_of(static_cast<std::uint32_t>(destination.tensor));
        const DType dtype = destination.dtype.value_or(tensor.output_dtype);
        if (!io::conversion_supported(stored.source_dtype, dtype))
            throw_usage_error("tensor '" + tensor.name + "' is stored as " +
                              std::string(dtype_name(stored.source_dtype)) +
                              " and cannot be read as " + std::string(dtype_name(dtype)));
        const std::uint64_t bytes = tensor.numel() * dtype_size(dtype);
        if (destination.bytes.size() != bytes)
            throw_usage_error("the memory for tensor '" + tensor.name + "' holds " +
                              std::to_string(destination.bytes.size()) + " bytes; its " +
                              std::string(dtype_name(dtype)) + " data needs " +
                              std::to_string(bytes));
        // Fresh memory faults page by page as it is filled; huge pages fault 512 times less.
        io::advise_huge_pages(destination.bytes);
        const std::vector<std::uint32_t>& of_tensor = parts.of_tensor.at(destination.tensor);
        if (of_tensor.empty() && tensor.is_alias())
            throw_usage_error(
                "tensor '" + tensor.name + "' is tied to '" +
                plan.tensors.tensors.at(static_cast<std::size_t>(tensor.alias_of)).name +
                "' and shares its memory: read that one");
        for (std::uint32_t p : of_tensor) {
            const run::ReadPart& read = parts.parts[p];
            const plan::PlannedTensor& source = plan.source_of(read.tensor);
            io::MemoryFill fill;
            fill.extents = read.part.extents;
            fill.replicas = read.part.replicas;
            fill.source_dtype = source.source_dtype;
            fill.output_dtype = dtype;
            // The part's bytes are the plan's output elements: the same elements in `dtype`.
            const std::uint64_t planned = dtype_size(source.output_dtype);
            fill.out = destination.bytes.subspan(
                static_cast<std::size_t>(read.part.skip / planned * dtype_size(dtype)),
                static_cast<std::size_t>(read.part.length / planned * dtype_size(dtype)));
            fill.name = tensor.name;
            if (progress && !progress->was_read(p)) {
                fill.check_ranges = progress->ranges_of(p);
                // A failed earlier read may have folded some of these bytes already.
                for (const CrcRange& range : fill.check_ranges)
                    piece_crcs.at(range.piece) = 0;
            }
            work.fills.at(read.rank % threads).push_back(std::move(fill));
            work.parts.push_back(p);
        }
    }
    if (progress) {
        work.completed = progress->completed_by(work.parts);
        for (std::uint32_t c : work.completed) {
            const run::CheckedRecord& record = check->records[c];
            for (std::uint32_t p = record.first_piece; p < record.first_piece + record.piece_count;
                 ++p) {
                const run::CheckPiece& piece = check->pieces[p];
                if (piece.extra_read)
                    work.extra.at(piece.rank % threads).push_back(p);
            }
        }
    }
    return work;
}

void StateDictReader::State::read_share(Work& work, unsigned index, const driver::StopFlag& stop) {
    io::InputFiles& files = *inputs.at(index);
    io::MemoryFillOptions fill_options;
    fill_options.buffer_size = share();
    fill_options.read_mode = options.read_mode;
    fill_options.after_chunk = [&stop] { stop.check(); };
    io::MemoryFiller filler(files, paths, work.fills[index], fill_options);
    filler.run(piece_crcs);
    for (std::uint32_t p : work.extra[index]) {
        const run::CheckPiece& piece = check->pieces[p];
        piece_crcs[p] = filler.checksum(
            {plan.tensors.records.at(piece.record).file, piece.offset, piece.length});
    }
    if (!first_read_done)
        work.mismatches[index] = driver::check_replicas_of(plan, index, files, share());
}

void StateDictReader::State::check_completed(const Work& work) const {
    std::vector<run::FailedRecord> failed;
    for (std::uint32_t c : work.completed) {
        const run::CheckedRecord& record = check->records[c];
        std::uint32_t crc = 0;
        for (std::uint32_t p = record.first_piece; p < record.first_piece + record.piece_count; ++p)
            crc = crc32_join(crc, piece_crcs[p], check->pieces[p].length);
        const InputRecord& input = plan.tensors.records.at(record.record);
        if (crc != input.crc32)
            failed.push_back({record.record, input.crc32, crc, c});
    }
    if (!failed.empty())
        throw Error(ErrorKind::kInput, run::describe_failed_records(plan, *check, failed));
}

StateDictReader::StateDictReader(const std::filesystem::path& checkpoint, const Options& options,
                                 const ReaderSettings& settings)
    : state_(std::make_unique<State>()) {
    State& state = *state_;
    state.options = reading_options(options);
    state.threads = thread_count(settings);
    state.plan = run::plan_in_process(checkpoint, state.options, state.threads);
    state.view = run::conversion_plan_view(state.plan);
    state.view.files.clear();
    state.view.index.reset();
    for (ConversionPlan::Tensor& tensor : state.view.tensors) {
        tensor.file.clear();
        tensor.other_files.clear();
    }
    for (const InputFile& input : state.plan.tensors.inputs)
        state.paths.push_back(input.path);
    state.parts = run::plan_read_parts(state.plan);
    if (state.options.input_crc) {
        state.check = run::plan_input_check(state.plan);
        state.progress.emplace(*state.check, state.parts);
        state.piece_crcs.assign(state.check->pieces.size(), 0);
        if (auto warning = run::unchecked_records_warning(state.plan, *state.check))
            state.view.warnings.push_back(std::move(*warning));
    }
    const std::size_t open_each =
        std::max<std::size_t>(io::InputFiles::default_capacity() / state.threads, 1);
    for (unsigned i = 0; i < state.threads; ++i) {
        state.inputs.push_back(
            std::make_unique<io::InputFiles>(state.plan.tensors.inputs, open_each));
    }
}

StateDictReader::~StateDictReader() = default;
StateDictReader::StateDictReader(StateDictReader&&) noexcept = default;
StateDictReader& StateDictReader::operator=(StateDictReader&&) noexcept = default;

const ConversionPlan& StateDictReader::plan() const noexcept {
    return state_->view;
}

bool StateDictReader::has_data(std::size_t tensor) const {
    return !state_->parts.of_tensor.at(tensor).empty();
}

unsigned StateDictReader::threads() const noexcept {
    return state_->threads;
}

void StateDictReader::read(std::span<const TensorDestination> destinations,
                           const std::function<bool()>& keep_going) {
    State& state = *state_;
    std::lock_guard lock(state.mutex);
    State::Work work = state.plan_work(destinations);
    driver::run_team(
        state.threads,
        [&](unsigned index, const driver::StopFlag& stop) { state.read_share(work, index, stop); },
        keep_going);
    std::vector<std::string> mismatches;
    for (const std::vector<std::string>& found : work.mismatches)
        mismatches.insert(mismatches.end(), found.begin(), found.end());
    if (!mismatches.empty())
        throw Error(ErrorKind::kInput, mismatch_message(mismatches));
    state.first_read_done = true;
    if (state.progress) {
        state.check_completed(work);
        state.progress->mark_read(work.parts);
        state.progress->mark_checked(work.completed);
    }
}

}  // namespace z2f
