#include "output/universal_layout.hpp"

#include <algorithm>
#include <optional>

#include "checkpoint/pickled_value.hpp"
#include "common/bytes.hpp"
#include "common/errors.hpp"
#include "container/zip_writer.hpp"
#include "output/torch_archive_layout.hpp"
#include "pickle/pickle_writer.hpp"

namespace z2f::output {
namespace {

using checkpoint::PickledGraph;
using checkpoint::PickledNode;

constexpr std::string_view kVersion = "3\n";

std::string stem_of(std::string_view path) {
    return container::zip::torch_archive_name(path);
}

// Pickles nodes of a value graph as Python's pickler would pickle the objects they stand for:
// every memoizable object once, then memo references (MemoPolicy::kLikePython).
class GraphPickler {
  public:
    GraphPickler(pickle::PickleWriter& writer, const PickledGraph& graph)
        : writer_(writer), graph_(graph), memo_(graph.nodes.size()) {}

    void write(std::uint32_t index) {
        const PickledNode& node = graph_.at(index);
        if (memo_[index]) {
            writer_.memo_get(*memo_[index]);
            return;
        }
        switch (node.kind) {
            case PickledNode::Kind::kNone:
                writer_.none();
                return;
            case PickledNode::Kind::kBool:
                writer_.boolean(node.integer != 0);
                return;
            case PickledNode::Kind::kInt:
                writer_.integer(node.integer);
                return;
            case PickledNode::Kind::kFloat:
                writer_.floating(node.real);
                return;
            case PickledNode::Kind::kString:
                writer_.unicode(node.text);
                remember(index);
                return;
            case PickledNode::Kind::kTuple:
                writer_.begin_tuple(node.children.size());
                for (std::uint32_t child : node.children)
                    write(child);
                writer_.end_tuple(node.children.size());
                if (!node.children.empty())
                    remember(index);  // Python never memoizes the empty tuple
                return;
            case PickledNode::Kind::kList:
                writer_.empty_list();
                remember(index);
                pickle::write_appends(writer_, node.children.size(),
                                      [&](std::size_t i) { write(node.children[i]); });
                return;
            case PickledNode::Kind::kDict:
            case PickledNode::Kind::kOrderedDict:
                if (node.kind == PickledNode::Kind::kDict) {
                    writer_.empty_dict();
                } else {
                    writer_.global("collections", "OrderedDict");
                    writer_.empty_tuple();
                    writer_.reduce();
                }
                remember(index);
                pickle::write_setitems(writer_, node.children.size() / 2, [&](std::size_t i) {
                    write(node.children[2 * i]);
                    write(node.children[2 * i + 1]);
                });
                return;
            case PickledNode::Kind::kGlobal:
                writer_.global(node.text, node.name);  // memoized by name
                return;
            case PickledNode::Kind::kObject:
                write(node.children.at(0));
                write(node.children.at(1));
                node.via_newobj ? writer_.newobj() : writer_.reduce();
                remember(index);
                if (node.has_state) {
                    write(node.children.at(2));
                    writer_.build();
                }
                return;
            case PickledNode::Kind::kUnsupported:
                throw_unsupported("", "the optimizer state holds " + node.text +
                                          ", which a universal optimizer_state.pt cannot carry "
                                          "over (only plain Python values and objects are)");
        }
    }

  private:
    void remember(std::uint32_t index) { memo_[index] = writer_.memo_size() - 1; }

    pickle::PickleWriter& writer_;
    const PickledGraph& graph_;
    std::vector<std::optional<std::uint32_t>> memo_;
};

// DeepSpeed's SubparamShape dataclass as the graph of what Python pickles for it: the class,
// an empty argument tuple (NEWOBJ), then its __dict__ (BUILD). The object is the last node.
PickledGraph sub_param_shape_graph(const plan::SubParamShapeValue& value) {
    PickledGraph graph;
    auto add = [&](PickledNode node) {
        graph.nodes.push_back(std::move(node));
        return static_cast<std::uint32_t>(graph.nodes.size() - 1);
    };
    auto text = [&](std::string string) {
        PickledNode node;
        node.kind = PickledNode::Kind::kString;
        node.text = std::move(string);
        return add(std::move(node));
    };
    auto integer = [&](std::int64_t number) {
        PickledNode node;
        node.kind = PickledNode::Kind::kInt;
        node.integer = number;
        return add(std::move(node));
    };
    PickledNode cls;
    cls.kind = PickledNode::Kind::kGlobal;
    cls.text = "deepspeed.checkpoint.universal_checkpoint";
    cls.name = "SubparamShape";
    const std::uint32_t callable = add(std::move(cls));
    PickledNode none;
    none.kind = PickledNode::Kind::kTuple;
    const std::uint32_t args = add(std::move(none));

    PickledNode state;
    state.kind = PickledNode::Kind::kDict;
    state.children.push_back(text("patterns"));
    PickledNode patterns;
    patterns.kind = PickledNode::Kind::kList;
    for (const std::string& pattern : value.patterns)
        patterns.children.push_back(text(pattern));
    state.children.push_back(add(std::move(patterns)));
    state.children.push_back(text("shape"));
    PickledNode shape;
    shape.kind = value.shape_is_tuple ? PickledNode::Kind::kTuple : PickledNode::Kind::kList;
    for (const checkpoint::SubParamShapeDim& dim : value.shape) {
        if (dim.kind == checkpoint::SubParamShapeDim::Kind::kInt) {
            shape.children.push_back(integer(dim.values.at(0)));
            continue;
        }
        PickledNode sizes;
        sizes.kind = dim.kind == checkpoint::SubParamShapeDim::Kind::kTuple
                         ? PickledNode::Kind::kTuple
                         : PickledNode::Kind::kList;
        for (std::int64_t size : dim.values)
            sizes.children.push_back(integer(size));
        shape.children.push_back(add(std::move(sizes)));
    }
    state.children.push_back(add(std::move(shape)));
    state.children.push_back(text("partition_dim"));
    state.children.push_back(integer(static_cast<std::int64_t>(value.partition_dim)));
    const std::uint32_t dict = add(std::move(state));

    PickledNode object;
    object.kind = PickledNode::Kind::kObject;
    object.via_newobj = true;
    object.has_state = true;
    object.children = {callable, args, dict};
    add(std::move(object));
    return graph;
}

// A storage of a whole file: its record name and bytes.
struct KnownStorage {
    std::string key;
    std::vector<std::byte> bytes;
};

// torch.save writes the storages in sorted key order, after data.pkl.
std::vector<std::byte> archive_bytes(std::string_view path, std::span<const std::byte> data_pkl,
                                     std::vector<KnownStorage> storages) {
    std::sort(storages.begin(), storages.end(),
              [](const KnownStorage& a, const KnownStorage& b) { return a.key < b.key; });
    TorchArchiveLayout archive{std::string(path), stem_of(path)};
    archive.add_record("data.pkl", data_pkl);
    for (const KnownStorage& storage : storages) {
        archive.add_record("data/" + storage.key, storage.bytes);
    }
    archive.add_record("version", as_byte_span(kVersion));
    return layout_bytes(archive.finish());
}

// Pushes a step value; a tensor step gets storage `key` (appended to `storages`).
void write_step(pickle::PickleWriter& writer, const checkpoint::OptimizerStep& step,
                std::vector<KnownStorage>& storages) {
    switch (step.form) {
        case checkpoint::OptimizerStep::Form::kInt:
            writer.integer(static_cast<std::int64_t>(step.bits));
            return;
        case checkpoint::OptimizerStep::Form::kFloat:
            writer.floating(std::bit_cast<double>(step.bits));
            return;
        case checkpoint::OptimizerStep::Form::kTensor:
            break;
    }
    pickle::TensorToWrite tensor;
    tensor.storage.dtype = step.dtype;
    tensor.storage.key = std::to_string(storages.size());
    tensor.storage.numel = 1;
    tensor.shape = step.shape;
    pickle::write_tensor_v2(writer, tensor);
    KnownStorage storage;
    storage.key = tensor.storage.key;
    for (std::size_t i = 0; i < dtype_size(step.dtype); ++i) {
        storage.bytes.push_back(static_cast<std::byte>((step.bits >> (8 * i)) & 0xFFu));
    }
    storages.push_back(std::move(storage));
}

std::string join(std::string_view a, std::string_view b) {
    return std::string(a) + "/" + std::string(b);
}

}  // namespace

std::string universal_tag_folder(std::string_view tag) {
    return std::string(tag) + "_universal";
}

std::string universal_tensor_path(std::string_view tag_folder, std::string_view param,
                                  plan::Stream stream) {
    return join(tag_folder, "zero/" + std::string(param) + "/" +
                                std::string(plan::stream_name(stream)) + ".pt");
}

std::string universal_step_path(std::string_view tag_folder, std::string_view param) {
    return join(tag_folder, "zero/" + std::string(param) + "/step.pt");
}

std::string universal_optimizer_state_path(std::string_view tag_folder) {
    return join(tag_folder, "zero/optimizer_state.pt");
}

OutputFileLayout layout_universal_tensor_file(std::string relative_path,
                                              const plan::TensorPlan& plan, std::uint32_t tensor,
                                              const UniversalTensorFileOptions& options) {
    if (tensor >= plan.tensors.size()) {
        throw_internal_error("universal tensor file: tensor index out of range");
    }
    const plan::PlannedTensor& planned = plan.tensors[tensor];
    if (planned.output_dtype != DType::kF32 || planned.is_alias()) {
        throw_internal_error("universal tensor file: '" + planned.name +
                             "' is not an fp32 tensor of its own");
    }
    pickle::PickleWriter writer(pickle::MemoPolicy::kLikePython);
    pickle::TensorToWrite ref;
    ref.storage.dtype = DType::kF32;
    ref.storage.key = "0";
    ref.storage.numel = planned.numel();
    ref.shape = planned.shape;
    ref.requires_grad = options.requires_grad;
    if (options.form == UniversalTensorForm::kParamDict) {
        // The entries in dict order: those before 'param', 'param', those after it.
        std::vector<const ParamDictEntry*> order;
        for (const ParamDictEntry& entry : options.entries) {
            if (!entry.after_param)
                order.push_back(&entry);
        }
        const std::size_t param_at = order.size();
        order.push_back(nullptr);
        for (const ParamDictEntry& entry : options.entries) {
            if (entry.after_param)
                order.push_back(&entry);
        }
        writer.empty_dict();
        pickle::write_setitems(writer, order.size(), [&](std::size_t i) {
            if (i == param_at) {
                writer.unicode("param");
                pickle::write_tensor_v2(writer, ref);
                return;
            }
            const ParamDictEntry& entry = *order[i];
            writer.unicode(entry.key);
            if (entry.object) {
                const PickledGraph graph = sub_param_shape_graph(*entry.object);
                GraphPickler(writer, graph)
                    .write(static_cast<std::uint32_t>(graph.nodes.size() - 1));
            } else if (entry.is_bool) {
                writer.boolean(entry.value != 0);
            } else {
                writer.integer(entry.value);
            }
        });
    } else {
        pickle::write_tensor_v2(writer, ref);
    }
    const std::vector<std::byte> data_pkl = writer.finish();

    TorchArchiveLayout archive(relative_path, stem_of(relative_path));
    archive.add_record("data.pkl", data_pkl);
    archive.add_slot("data/0", tensor, planned.output_bytes());
    archive.add_record("version", as_byte_span(kVersion));
    return archive.finish();
}

std::vector<std::byte> universal_step_file(const checkpoint::OptimizerStep& step) {
    pickle::PickleWriter writer(pickle::MemoPolicy::kLikePython);
    std::vector<KnownStorage> storages;
    write_step(writer, step, storages);
    const std::vector<std::byte> data_pkl = writer.finish();
    return archive_bytes("step.pt", data_pkl, std::move(storages));
}

std::vector<std::byte> universal_optimizer_state_file(const checkpoint::CheckpointMeta& meta) {
    if (meta.optim.empty()) {
        throw_internal_error("universal optimizer state: no optimizer files");
    }
    const checkpoint::OptimStatesInfo& rank0 = meta.optim.front();
    const checkpoint::OptimizerGlobalState& state = rank0.global_state;
    const std::string& path = meta.files.optim_files.front();
    if (!state.param_groups) {
        throw_input_error(path,
                          "holds no optimizer param_groups: a universal checkpoint's "
                          "optimizer_state.pt needs them");
    }
    const bool stage3 = meta.layout == checkpoint::MasterLayout::kPerParam;

    pickle::PickleWriter writer(pickle::MemoPolicy::kLikePython);
    GraphPickler values(writer, state.graph);
    std::vector<KnownStorage> storages;
    const std::size_t extra = stage3 ? 2 : 1;
    writer.empty_dict();
    try {
        pickle::write_setitems(writer, state.entries.size() + extra, [&](std::size_t i) {
            if (i < state.entries.size()) {
                values.write(state.entries[i].key_node);
                const PickledNode& value = state.graph.at(state.entries[i].value_node);
                if (!stage3 && state.entries[i].key == "group_paddings" &&
                    value.kind == PickledNode::Kind::kList) {
                    // A universal checkpoint holds no padded flat groups: zeros, one per group,
                    // as ds_to_universal.py writes them (rank 0 pads when it is the last rank).
                    writer.empty_list();
                    pickle::write_appends(writer, value.children.size(),
                                          [&](std::size_t) { writer.integer(0); });
                    return;
                }
                if (!stage3 && state.entries[i].key == "partition_count" &&
                    value.kind == PickledNode::Kind::kList) {
                    // ds_to_universal.py states the data-parallel degree for every group, expert
                    // groups (partitioned over fewer ranks) included; no loader reads it.
                    writer.empty_list();
                    pickle::write_appends(writer, value.children.size(), [&](std::size_t) {
                        writer.integer(static_cast<std::int64_t>(meta.world_size));
                    });
                    return;
                }
                values.write(state.entries[i].value_node);
                return;
            }
            if (stage3 && i == state.entries.size()) {
                // The inner torch optimizer state, stripped to the steps of every sub-group.
                writer.unicode("optimizer_state_dict");
                writer.empty_dict();
                writer.mark();
                writer.unicode("state");
                writer.empty_dict();
                std::vector<std::size_t> with_step;
                for (std::size_t j = 0; j < rank0.group_states.size(); ++j) {
                    if (rank0.group_states[j].step)
                        with_step.push_back(j);
                }
                pickle::write_setitems(writer, with_step.size(), [&](std::size_t k) {
                    writer.integer(static_cast<std::int64_t>(with_step[k]));
                    writer.empty_dict();
                    writer.shared_unicode("step");
                    write_step(writer, *rank0.group_states[with_step[k]].step, storages);
                    writer.setitem();
                });
                writer.unicode("param_groups");
                values.write(*state.param_groups);
                writer.setitems();
                return;
            }
            writer.unicode("param_groups");
            values.write(*state.param_groups);
        });
    } catch (const Error& error) {
        if (error.kind() == ErrorKind::kUnsupported) {
            throw_unsupported(path, error.what());
        }
        throw;
    }
    const std::vector<std::byte> data_pkl = writer.finish();
    return archive_bytes("optimizer_state.pt", data_pkl, std::move(storages));
}

std::vector<std::byte> universal_latest_file(std::string_view tag_folder) {
    std::vector<std::byte> bytes;
    for (char c : tag_folder) {
        bytes.push_back(static_cast<std::byte>(c));
    }
    return bytes;
}

std::vector<UniversalOutputFile> plan_universal_files(
    const checkpoint::CheckpointMeta& optimizer_meta, const plan::UniversalPlan& plan) {
    const std::string folder = universal_tag_folder(plan.tag);
    std::vector<UniversalOutputFile> files;
    auto add_bytes = [&](std::string path, std::vector<std::byte> bytes) {
        UniversalOutputFile file;
        file.kind = UniversalOutputFile::Kind::kBytes;
        file.path = std::move(path);
        file.size = bytes.size();
        file.bytes = std::move(bytes);
        files.push_back(std::move(file));
    };
    constexpr plan::Stream kStreams[] = {plan::Stream::kMaster, plan::Stream::kExpAvg,
                                         plan::Stream::kExpAvgSq};
    for (const plan::UniversalParam& param : plan.params) {
        for (std::size_t s = 0; s < 3; ++s) {
            UniversalTensorFileOptions options;
            options.form =
                param.raw ? UniversalTensorForm::kRawTensor : UniversalTensorForm::kParamDict;
            options.entries = param.entries;
            options.requires_grad = kStreams[s] == plan::Stream::kMaster;
            UniversalOutputFile file;
            file.kind = UniversalOutputFile::Kind::kTensor;
            file.path = universal_tensor_path(folder, param.name, kStreams[s]);
            file.layout =
                layout_universal_tensor_file(file.path, plan.plan, param.tensors[s], options);
            file.size = file.layout.size;
            files.push_back(std::move(file));
        }
        if (!plan.stage3) {
            if (!param.step) {
                throw_internal_error("universal files: no step for '" + param.name +
                                     "' (the universal plan checks it)");
            }
            add_bytes(universal_step_path(folder, param.name), universal_step_file(*param.step));
        }
    }
    add_bytes(universal_optimizer_state_path(folder),
              universal_optimizer_state_file(optimizer_meta));
    for (const plan::UniversalCopy& copy : plan.copies) {
        UniversalOutputFile file;
        file.kind = UniversalOutputFile::Kind::kCopy;
        file.path = folder + "/" + copy.path.substr(copy.path.find_last_of('/') + 1);
        file.source = copy.input;
        file.size = copy.size;
        files.push_back(std::move(file));
    }
    add_bytes(std::string(kLatestUniversalFile), universal_latest_file(folder));
    return files;
}

}  // namespace z2f::output
