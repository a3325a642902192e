#include "checkpoint/file_meta.hpp"

#include "checkpoint/parallel_states_reader.hpp"
#include "checkpoint/states_reader.hpp"
#include "checkpoint/universal_assemble.hpp"
#include "checkpoint/zero0_masters.hpp"
#include "container/torch_file.hpp"

namespace z2f::checkpoint {

FileMeta read_file_meta(const InputFileSpec& input, std::uint32_t index) {
    container::TorchFile file = container::TorchFile::open(input.path);
    FileMeta meta;
    meta.size = file.file_size();
    switch (input.kind) {
        case InputKind::kFirstModel:
        case InputKind::kModelParallelRank:
            meta.info = ModelFile{read_model_states(file, index, ModelFileScope::kFull), {}};
            break;
        case InputKind::kOtherModel:
            meta.info =
                ModelFile{read_model_states(file, index, ModelFileScope::kFrozenFragmentsOnly), {}};
            break;
        case InputKind::kOptim:
            meta.info = OptimFile{read_optim_states(file, index), {}};
            break;
        case InputKind::kUniversalParam:
            meta.info = OptimFile{read_universal_param(file, index), {}};
            break;
        case InputKind::kGridModel: {
            ModelFile model{read_model_states(file, index, ModelFileScope::kFull),
                            read_parallel_model_extras(file)};
            model.extras.zero0_masters = read_zero0_masters(file, model.states, index);
            meta.info = std::move(model);
            break;
        }
        case InputKind::kGridOptim:
            meta.info = OptimFile{read_optim_states(file, index), read_parallel_optim_extras(file)};
            break;
        case InputKind::kStateDict:
            meta.info = read_state_dict_file(file, index);
            break;
    }
    meta.records = file.located_records(index);
    return meta;
}

}  // namespace z2f::checkpoint
