// The files of a universal checkpoint (docs/universal-checkpoint.md), byte for byte as
// DeepSpeed's ds_to_universal.py writes them through torch.save under torch 1.x, so that every
// DeepSpeed loader, old or new, reads them.
//
//   OUT_DIR/<tag>_universal/zero/<param>/fp32.pt        a tensor file (below), requires_grad=True
//   OUT_DIR/<tag>_universal/zero/<param>/exp_avg.pt     a tensor file, requires_grad=False
//   OUT_DIR/<tag>_universal/zero/<param>/exp_avg_sq.pt  a tensor file, requires_grad=False
//   OUT_DIR/<tag>_universal/zero/<param>/step.pt        ZeRO-1/2 only: torch.save(step)
//   OUT_DIR/<tag>_universal/zero/optimizer_state.pt     the global optimizer state
//   OUT_DIR/<tag>_universal/<model-states files>        byte copies of the originals
//   OUT_DIR/latest_universal                            "<tag>_universal", no newline; last
//
// Every .pt file is a torch zip archive (container/zip_writer.hpp) whose records live in the
// folder named after the file's stem ("fp32", "exp_avg", "step", "optimizer_state"):
//   <stem>/data.pkl    protocol-2 pickle, memoized as Python's pickler does (every str, dict,
//                      list, non-empty tuple, REDUCE and NEWOBJ result gets a BINPUT)
//   <stem>/data/<k>    storages, keys "0", "1", ... in order of first reference, written in
//                      sorted key order (as strings, as torch.save sorts them)
//   <stem>/version     "3\n"
// and no `byteorder` record (torch < 2.1 writes none; readers then assume little-endian).
//
// Tensor files (one storage, "0", holding exactly the tensor's float32 bytes):
//   ZeRO-1/2  data.pkl = EMPTY_DICT BINPUT 0 MARK 'cat_dim' BINPUT 1 K 0 'param' BINPUT 2
//             <tensor> SETITEMS: {'cat_dim': 0, 'param': T}, T in the parameter's full shape
//             (a 0-dim parameter as (1,)). Tensor-parallel parameters have other entries
//             before 'param', each key BINPUT and an int (K) or NEWTRUE: {'param': T}
//             (replicated), {'cat_dim': 1, 'param': T}, {'cat_dim': 0, 'param_n_sub_params':
//             2, 'param': T}, {'cat_dim': 0, 'vocab_tensor': True, 'param': T}
//   ZeRO-3    data.pkl = <tensor>: T itself, flat 1-D
//   <tensor>  GLOBAL 'torch._utils _rebuild_tensor_v2' BINPUT, MARK, MARK 'storage' BINPUT
//             GLOBAL 'torch FloatStorage' BINPUT '0' BINPUT 'cpu' BINPUT numel TUPLE BINPUT
//             BINPERSID, 0, size tuple BINPUT, stride tuple BINPUT (a 0-dim tensor: two
//             EMPTY_TUPLEs), NEWTRUE/NEWFALSE, GLOBAL 'collections OrderedDict' BINPUT
//             EMPTY_TUPLE REDUCE BINPUT, TUPLE BINPUT, REDUCE BINPUT
// The storage record is the file's one slot; its data descriptor and the central directory
// follow from the slot's CRC (crc_tail).
//
// step.pt: torch.save of the group's step as the optimizer held it: a raw tensor (0-dim
// float32, requires_grad=False) with its storage record, or a pickled int / float.
//
// optimizer_state.pt: a dict of the kept optimizer_state_dict entries, in file order (the
// loss scaler re-emitted as the object it was, §4; at ZeRO-1/2 group_paddings as zeros), then
//   ZeRO-1/2  'param_groups': the torch optimizer's param_groups
//   ZeRO-3    'optimizer_state_dict': {'state': {j: {'step': step_j}}, 'param_groups': [...]},
//             'param_groups': the same list again (a memo reference)
// The values are re-pickled from the source's value graph (checkpoint/pickled_value.hpp) with
// its sharing, so ZeRO-1/2 files equal ds_to_universal's byte for byte.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "checkpoint/checkpoint_meta.hpp"
#include "output/output_layout.hpp"
#include "plan/consolidation.hpp"
#include "plan/tensor_plan.hpp"
#include "plan/universal_plan.hpp"

namespace z2f::output {

inline constexpr std::string_view kLatestUniversalFile = "latest_universal";

// "<tag>_universal": the folder DeepSpeed's converter names after the source tag.
std::string universal_tag_folder(std::string_view tag);
// "<tag_folder>/zero/<param>/<fp32|exp_avg|exp_avg_sq>.pt"
std::string universal_tensor_path(std::string_view tag_folder, std::string_view param,
                                  plan::Stream stream);
// "<tag_folder>/zero/<param>/step.pt"
std::string universal_step_path(std::string_view tag_folder, std::string_view param);
// "<tag_folder>/zero/optimizer_state.pt"
std::string universal_optimizer_state_path(std::string_view tag_folder);

enum class UniversalTensorForm : std::uint8_t {
    kParamDict,  // ZeRO-1/2: {'cat_dim': 0, 'param': T}
    kRawTensor,  // ZeRO-3: T
};

using plan::ParamDictEntry;

struct UniversalTensorFileOptions {
    UniversalTensorForm form = UniversalTensorForm::kParamDict;
    // The param dict's entries before 'param' (plan::UniversalParam::entries): cat_dim for
    // every parameter merged along a dimension, param_n_sub_params and vocab_tensor for
    // tensor-parallel ones.
    std::vector<ParamDictEntry> entries = {{"cat_dim", 0, false}};
    bool requires_grad = false;
};

// The layout of one tensor file holding plan.tensors[tensor] (its shape, float32 output), at
// `relative_path` in the output directory. One slot: the tensor's bytes.
OutputFileLayout layout_universal_tensor_file(std::string relative_path,
                                              const plan::TensorPlan& plan, std::uint32_t tensor,
                                              const UniversalTensorFileOptions& options);

// Whole files, known from the metadata alone.
std::vector<std::byte> universal_step_file(const checkpoint::OptimizerStep& step);
// Rank 0's global optimizer state, param_groups and (ZeRO-3) steps. Throws an unsupported error
// naming the value when a kept value cannot be pickled again (a tensor among the
// hyper-parameters, ...), an input error without param_groups.
std::vector<std::byte> universal_optimizer_state_file(const checkpoint::CheckpointMeta& meta);
std::vector<std::byte> universal_latest_file(std::string_view tag_folder);

// Every file of the universal checkpoint `plan`, in the order to write them: per parameter its
// tensor files (and step.pt), optimizer_state.pt (from `optimizer_meta`, the data-parallel
// checkpoint whose first optimizer file holds it), the model-states copies (plan.copies), and
// latest_universal last, so that a reader never sees latest_universal name a partial folder.
struct UniversalOutputFile {
    enum class Kind : std::uint8_t {
        kTensor,  // `layout`: fixed regions + one slot + crc_tail from the slot's CRC
        kBytes,   // `bytes`: the whole file
        kCopy,    // a byte copy of input file `source` (an index into meta.inputs)
    };
    Kind kind = Kind::kBytes;
    std::string path;  // relative to OUT_DIR
    std::uint64_t size = 0;
    OutputFileLayout layout;
    std::vector<std::byte> bytes;
    std::uint32_t source = 0;
};

std::vector<UniversalOutputFile> plan_universal_files(
    const checkpoint::CheckpointMeta& optimizer_meta, const plan::UniversalPlan& plan);

}  // namespace z2f::output
