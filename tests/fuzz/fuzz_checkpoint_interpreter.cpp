// libFuzzer target: the DeepSpeed checkpoint interpreter (src/checkpoint/states_reader.hpp) on
// top of TorchFile (container + pickle + tensor location), and the consolidation planner fed with
// what it read.
//
// Two input shapes, told apart by their first bytes:
//   "PK\3\4"...  a whole torch.save file (or one in torch's legacy format, which starts with the
//                pickled magic number). Mutations reach the container and, where a zip CRC is
//                kept consistent (or zero), the pickle.
//   otherwise    one or two pickles separated by kFileSeparator. Each becomes the data.pkl of a
//                torch zip that the harness builds around it, with a record data/<key> of the
//                declared size for every storage the pickle names, so that mutations of the
//                pickle get past tensor location into the interpreter proper. The first pickle
//                is read as a model-states file, the second (or the first again) as an
//                optimizer-states file.
//
// Every file is read as a full model-states file, a frozen-fragments-only model-states file and
// an optimizer-states file, and by the parallel readers (src/checkpoint/parallel_states_reader.hpp)
// as a model file's extras, an optimizer file's extras and a layer or expert state dict. When the
// model and the optimizer reading both succeed, they are assembled into a CheckpointMeta for a
// world of partition_count ranks (at most 8) whose every rank holds that same file, and planned;
// and into a tensor-parallel checkpoint of two TP ranks that both hold those files, merged by the
// rules the model file carries (docs/parallel-checkpoints.md §3). Post-conditions checked on
// success: every located tensor lies in its file, numel and byte length agree with shape and
// dtype, and every planned tensor's extents lie in their input files and add up to its size
// (for merged tensors: when they can be flattened).
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/assemble.hpp"
#include "checkpoint/parallel_assemble.hpp"
#include "checkpoint/parallel_states_reader.hpp"
#include "checkpoint/states_reader.hpp"
#include "common/checked_math.hpp"
#include "container/torch_file.hpp"
#include "fuzz_support.hpp"
#include "pickle/machine.hpp"
#include "plan/consolidation.hpp"
#include "plan/parallel_plan.hpp"
#include "support/zip_builder.hpp"

namespace z2f::fuzz {
namespace {

constexpr std::string_view kTarget = "checkpoint_interpreter";
constexpr std::string_view kFileSeparator = "\n#z2f-fuzz-next-file#\n";
constexpr std::string_view kZipMagic = "PK\x03\x04";
// Storage records the harness synthesises: bounded so that one input stays cheap. A storage
// over the limit gets a 1-byte record, which exercises the size-mismatch refusal instead.
constexpr std::uint64_t kMaxRecordBytes = std::uint64_t{64} << 10;
constexpr std::uint64_t kMaxTotalRecordBytes = std::uint64_t{1} << 20;
constexpr std::size_t kMaxRecords = 256;
constexpr std::size_t kMaxKeyLength = 1024;
constexpr std::int64_t kMaxPlannedWorld = 8;

std::string_view as_text(std::span<const std::byte> bytes) {
    return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

// The torch zip that torch.save would have written around `pickle_bytes`.
std::vector<std::byte> wrap_pickle(std::span<const std::byte> pickle_bytes) {
    std::vector<testing::ZipBuilderEntry> entries;
    entries.push_back({"archive/data.pkl",
                       std::vector<std::byte>(pickle_bytes.begin(), pickle_bytes.end()),
                       0,
                       {},
                       0,
                       true});
    entries.push_back({"archive/byteorder", testing::bytes_of("little"), 0, {}, 0, true});
    // Storages are found by parsing the pickle once here; a pickle that does not parse is still
    // wrapped, so that TorchFile::open reports the error itself.
    std::optional<pickle::Document> document;
    run_guarded(kTarget,
                [&] { document = pickle::parse_pickle(pickle_bytes, "harness pre-parse"); });
    if (document) {
        std::uint64_t total = 0;
        std::size_t records = 0;
        for_each_object(document->root(), [&](const pickle::Object& object) {
            if (object.type != pickle::ObjectType::kStorage || records >= kMaxRecords) {
                return;
            }
            const auto& storage = static_cast<const pickle::Storage&>(object);
            if (storage.key.size() > kMaxKeyLength) {
                return;  // no record: the "missing record" refusal
            }
            std::uint64_t item = storage.dtype ? dtype_size(*storage.dtype) : 1;
            std::optional<std::uint64_t> bytes = checked_mul(storage.numel, item);
            std::uint64_t size =
                bytes && *bytes <= kMaxRecordBytes && total + *bytes <= kMaxTotalRecordBytes
                    ? *bytes
                    : 1;
            total += size;
            ++records;
            entries.push_back({"archive/data/" + storage.key,
                               std::vector<std::byte>(static_cast<std::size_t>(size)),
                               0,
                               {},
                               0,
                               true});
        });
    }
    entries.push_back({"archive/version", testing::bytes_of("3\n"), 0, {}, 0, true});
    return testing::build_zip(entries);
}

void check_ref(const checkpoint::TensorRef& ref, std::uint64_t file_size, std::string_view what) {
    std::optional<std::uint64_t> numel = checked_numel(ref.shape);
    expect(numel && *numel == ref.numel, kTarget, std::string(what) + ": numel is not the shape's");
    std::optional<std::uint64_t> length = checked_mul(ref.numel, dtype_size(ref.dtype));
    expect(length && *length == ref.length, kTarget,
           std::string(what) + ": length is not numel x itemsize");
    expect(ref.offset <= file_size && ref.length <= file_size - ref.offset, kTarget,
           std::string(what) + ": tensor bytes lie outside the file");
}

struct FileReading {
    std::uint64_t size = 0;
    std::optional<checkpoint::ModelStatesInfo> model;
    std::optional<checkpoint::OptimStatesInfo> optim;
    std::optional<checkpoint::ParallelModelExtras> model_extras;
    std::optional<checkpoint::ParallelOptimExtras> optim_extras;
};

// Locates every tensor of the document directly, as zero2fp32-inspect does, and checks that a
// located tensor lies inside the data of its storage record.
void locate_every_tensor(const container::TorchFile& file) {
    const std::uint64_t size = file.file_size();
    for_each_object(file.root(), [&](const pickle::Object& object) {
        if (object.type != pickle::ObjectType::kTensor) {
            return;
        }
        const auto& tensor = static_cast<const pickle::Tensor&>(object);
        run_guarded(kTarget, [&] {
            container::TensorBytes bytes = file.locate(tensor, "tensor");
            std::uint64_t begin = 0;
            std::uint64_t record_size = 0;
            if (const container::TorchArchive* zip = file.zip()) {
                const container::ZipRecord& record = zip->require(bytes.record);
                begin = zip->data_offset(file.file(), record);
                record_size = record.size;
            } else {
                const container::LegacyStorage* storage = file.legacy()->find(tensor.storage->key);
                expect(storage != nullptr, kTarget,
                       "locate() succeeded on a storage the legacy file does not hold");
                begin = storage->data_offset;
                record_size = storage->size;
            }
            expect(bytes.offset >= begin && bytes.length <= record_size &&
                       bytes.offset - begin <= record_size - bytes.length,
                   kTarget, "locate() returned bytes outside the tensor's storage record");
            expect(bytes.offset + bytes.length <= size, kTarget,
                   "locate() returned bytes outside the file");
        });
    });
}

FileReading read_file(const std::string& path) {
    FileReading reading;
    std::optional<container::TorchFile> file;
    if (!run_guarded(kTarget, [&] { file.emplace(container::TorchFile::open(path)); })) {
        return reading;
    }
    reading.size = file->file_size();
    locate_every_tensor(*file);
    run_guarded(kTarget, [&] {
        checkpoint::ModelStatesInfo info =
            checkpoint::read_model_states(*file, 0, checkpoint::ModelFileScope::kFull);
        for (const checkpoint::NamedTensor& named : info.module_tensors) {
            check_ref(named.tensor, reading.size, "module tensor");
        }
        for (const checkpoint::NamedTensor& named : info.frozen_param_fragments) {
            check_ref(named.tensor, reading.size, "frozen fragment");
        }
        reading.model = std::move(info);
    });
    run_guarded(kTarget, [&] {
        checkpoint::ModelStatesInfo info = checkpoint::read_model_states(
            *file, 0, checkpoint::ModelFileScope::kFrozenFragmentsOnly);
        for (const checkpoint::NamedTensor& named : info.frozen_param_fragments) {
            check_ref(named.tensor, reading.size, "frozen fragment");
        }
    });
    run_guarded(kTarget, [&] {
        checkpoint::OptimStatesInfo info = checkpoint::read_optim_states(*file, 0);
        for (const checkpoint::TensorRef& ref : info.master) {
            check_ref(ref, reading.size, "master partition");
        }
        reading.optim = std::move(info);
    });
    run_guarded(kTarget,
                [&] { reading.model_extras = checkpoint::read_parallel_model_extras(*file); });
    run_guarded(kTarget,
                [&] { reading.optim_extras = checkpoint::read_parallel_optim_extras(*file); });
    run_guarded(kTarget, [&] {
        checkpoint::StateDictInfo state = checkpoint::read_state_dict_file(*file, 0);
        for (const checkpoint::NamedTensor& named : state.tensors) {
            check_ref(named.tensor, reading.size, "state dict tensor");
        }
    });
    return reading;
}

void check_plan(const plan::TensorPlan& plan) {
    for (std::size_t i = 0; i < plan.tensors.size(); ++i) {
        const plan::PlannedTensor& tensor = plan.tensors[i];
        if (tensor.is_alias()) {
            expect(static_cast<std::uint64_t>(tensor.alias_of) < plan.tensors.size() &&
                       tensor.extents.empty(),
                   kTarget, "alias '" + tensor.name + "' is malformed");
            continue;
        }
        std::optional<std::uint64_t> numel = checked_numel(tensor.shape);
        std::optional<std::uint64_t> expected =
            numel ? checked_mul(*numel, dtype_size(tensor.source_dtype)) : std::nullopt;
        expect(expected.has_value(), kTarget, "tensor '" + tensor.name + "' size overflows");
        if (!tensor.pieces.empty() && !plan::flattenable(tensor.pieces)) {
            continue;  // averaged replicas: no flat extents
        }
        std::uint64_t total = 0;
        for (const SourceExtent& extent : plan::source_extents(tensor)) {
            expect(extent.file < plan.inputs.size(), kTarget,
                   "tensor '" + tensor.name + "' reads from an unknown input");
            std::uint64_t file_size = plan.inputs[extent.file].size;
            expect(extent.offset <= file_size && extent.length <= file_size - extent.offset,
                   kTarget, "tensor '" + tensor.name + "' reads past the end of its input file");
            std::optional<std::uint64_t> sum = checked_add(total, extent.length);
            expect(sum.has_value(), kTarget, "tensor '" + tensor.name + "' extents overflow");
            total = *sum;
        }
        expect(total == *expected, kTarget,
               "tensor '" + tensor.name + "': extents hold " + std::to_string(total) +
                   " bytes, the tensor " + std::to_string(*expected));
    }
}

// A checkpoint whose every rank holds the same model and optimizer file: enough to drive the
// assembly checks and the planner with fuzzed metadata.
void plan_checkpoint(const std::string& model_path, const FileReading& model_file,
                     const std::string& optim_path, const FileReading& optim_file) {
    const checkpoint::OptimStatesInfo& optim = *optim_file.optim;
    if (optim.partition_count.empty()) {
        return;
    }
    std::int64_t world =
        *std::max_element(optim.partition_count.begin(), optim.partition_count.end());
    if (world < 1 || world > kMaxPlannedWorld) {
        return;
    }
    checkpoint::CheckpointFiles files;
    files.checkpoint_dir = "/fuzz";
    files.tag = "global_step1";
    files.tag_dir = "/fuzz/global_step1";
    files.per_rank_model_files = optim.layout == checkpoint::MasterLayout::kPerParam;
    std::size_t model_count = files.per_rank_model_files ? static_cast<std::size_t>(world) : 1;
    files.model_files.assign(model_count, model_path);
    files.optim_files.assign(static_cast<std::size_t>(world), optim_path);

    std::vector<checkpoint::FileMeta> metas;
    for (std::size_t i = 0; i < model_count; ++i) {
        checkpoint::FileMeta meta;
        meta.size = model_file.size;
        checkpoint::ModelStatesInfo info = *model_file.model;
        if (i > 0) {
            // Only the first model file is read in full.
            checkpoint::ModelStatesInfo fragments;
            fragments.frozen_param_fragments = info.frozen_param_fragments;
            info = std::move(fragments);
        }
        for (checkpoint::NamedTensor& named : info.module_tensors) {
            named.tensor.file = static_cast<std::uint32_t>(i);
        }
        for (checkpoint::NamedTensor& named : info.frozen_param_fragments) {
            named.tensor.file = static_cast<std::uint32_t>(i);
        }
        meta.info = checkpoint::ModelFile{std::move(info), {}};
        metas.push_back(std::move(meta));
    }
    for (std::size_t r = 0; r < static_cast<std::size_t>(world); ++r) {
        checkpoint::FileMeta meta;
        meta.size = optim_file.size;
        checkpoint::OptimStatesInfo info = optim;
        for (checkpoint::TensorRef& ref : info.master) {
            ref.file = static_cast<std::uint32_t>(model_count + r);
        }
        meta.info = checkpoint::OptimFile{std::move(info), {}};
        metas.push_back(std::move(meta));
    }

    std::optional<checkpoint::CheckpointMeta> meta;
    if (!run_guarded(kTarget, [&] {
            meta = checkpoint::assemble_checkpoint_meta(files, std::move(metas));
        })) {
        return;
    }
    plan::PlanOptions defaults;
    plan::PlanOptions parity;
    parity.cast_all_buffers = true;
    parity.keep_frozen_dtype = true;
    plan::PlanOptions slim;
    slim.dtype = DType::kBF16;
    slim.exclude_frozen = true;
    slim.stage1_frozen = Stage1Frozen::kSkip;
    for (const plan::PlanOptions* options : {&defaults, &parity, &slim}) {
        run_guarded(kTarget, [&] { check_plan(plan::plan_consolidation(*meta, *options).plan); });
    }
}

// Two TP ranks that both hold `model_file`, each with `world` copies of `optim_file` as its
// ZeRO partitions (none when the optimizer reading failed: ZeRO-0), assembled and merged.
void plan_tensor_parallel(const std::string& model_path, const FileReading& model_file,
                          const std::string& optim_path, const FileReading& optim_file) {
    std::size_t world = 0;
    if (optim_file.optim && optim_file.optim_extras && !optim_file.optim->partition_count.empty()) {
        std::int64_t count = *std::max_element(optim_file.optim->partition_count.begin(),
                                               optim_file.optim->partition_count.end());
        if (count < 1 || count > kMaxPlannedWorld) {
            return;
        }
        world = static_cast<std::size_t>(count);
    }
    checkpoint::FileGrid grid;
    grid.folder = {"/fuzz", "global_step1", "/fuzz/global_step1"};
    grid.model_files = {model_path, model_path};
    if (world > 0) {
        grid.optim_files.assign(2, std::vector<std::string>(world, optim_path));
    }
    grid.tp_degree = 2;
    std::vector<checkpoint::FileMeta> metas;
    for (std::uint32_t mp = 0; mp < 2; ++mp) {
        checkpoint::ModelFile model{*model_file.model, *model_file.model_extras};
        for (checkpoint::NamedTensor& named : model.states.module_tensors) {
            named.tensor.file = mp;
        }
        for (checkpoint::NamedTensor& named : model.states.frozen_param_fragments) {
            named.tensor.file = mp;
        }
        checkpoint::FileMeta& meta = metas.emplace_back();
        meta.size = model_file.size;
        meta.info = std::move(model);
    }
    for (std::uint32_t i = 0; i < 2 * world; ++i) {
        checkpoint::OptimFile optim{*optim_file.optim, *optim_file.optim_extras};
        for (checkpoint::TensorRef& ref : optim.states.master) {
            ref.file = 2 + i;
        }
        checkpoint::FileMeta& meta = metas.emplace_back();
        meta.size = optim_file.size;
        meta.info = std::move(optim);
    }
    std::optional<checkpoint::ParallelCheckpointMeta> meta;
    if (!run_guarded(kTarget,
                     [&] { meta = checkpoint::assemble_parallel_meta(grid, std::move(metas)); })) {
        return;
    }
    for (plan::ReplicaPolicy policy :
         {plan::ReplicaPolicy::kCheck, plan::ReplicaPolicy::kAverage}) {
        plan::ParallelPlanOptions options;
        options.tp_replicated = policy;
        options.strip_vocab_padding = policy == plan::ReplicaPolicy::kAverage;
        run_guarded(kTarget,
                    [&] { check_plan(plan::plan_parallel_consolidation(*meta, options).plan); });
    }
}

}  // namespace
}  // namespace z2f::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace z2f;
    std::span<const std::byte> input = fuzz::as_bytes(data, size);
    std::vector<std::string> paths;
    if (fuzz::as_text(input).starts_with(fuzz::kZipMagic) ||
        container::sniff_torch_file(input.first(std::min<std::size_t>(input.size(), 16))) ==
            container::TorchFileKind::kLegacyPickle) {
        paths.push_back(fuzz::scratch_file(0).write(input));
    } else {
        std::size_t split = fuzz::as_text(input).find(fuzz::kFileSeparator);
        std::span<const std::byte> first = input.first(std::min(split, input.size()));
        paths.push_back(fuzz::scratch_file(0).write(fuzz::wrap_pickle(first)));
        if (split != std::string_view::npos) {
            std::span<const std::byte> second = input.subspan(split + fuzz::kFileSeparator.size());
            paths.push_back(fuzz::scratch_file(1).write(fuzz::wrap_pickle(second)));
        }
    }

    std::vector<fuzz::FileReading> readings;
    for (const std::string& path : paths) {
        readings.push_back(fuzz::read_file(path));
    }
    const fuzz::FileReading& model = readings.front();
    const std::string& optim_path = paths.back();
    const fuzz::FileReading& optim = readings.back();
    if (model.model && optim.optim) {
        fuzz::plan_checkpoint(paths.front(), model, optim_path, optim);
    }
    if (model.model && model.model_extras) {
        fuzz::plan_tensor_parallel(paths.front(), model, optim_path, optim);
    }
    return 0;
}
