#include "checkpoint/sequence_parallel.hpp"

#include <algorithm>
#include <set>

#include "common/errors.hpp"

namespace z2f::checkpoint {
namespace {

std::uint64_t mp_rank_of(const std::vector<std::uint64_t>& ranks, std::size_t i) {
    return i < ranks.size() ? ranks[i] : 0;
}

// The first ZeRO file whose name carries an mp rank above 00, or "" when none does.
std::string first_named_mp_rank(const CheckpointFiles& files) {
    for (std::size_t i = 0; i < files.optim_files.size(); ++i) {
        if (mp_rank_of(files.optim_mp_ranks, i) != 0)
            return files.optim_files[i];
    }
    for (std::size_t i = 0; i < files.model_files.size(); ++i) {
        if (mp_rank_of(files.model_mp_ranks, i) != 0)
            return files.model_files[i];
    }
    return {};
}

// Every file of `paths` names mp rank 00, or every one names its ZeRO rank mod `degree`.
void check_names(const std::vector<std::string>& paths, const std::vector<std::uint64_t>& ranks,
                 std::uint32_t degree, const std::string& model_path) {
    bool all_zero = true;
    for (std::size_t i = 0; i < paths.size(); ++i)
        all_zero = all_zero && mp_rank_of(ranks, i) == 0;
    if (all_zero)
        return;
    for (std::size_t r = 0; r < paths.size(); ++r) {
        if (mp_rank_of(ranks, r) != r % degree) {
            throw_input_error(paths[r],
                              "names model-parallel rank " + std::to_string(mp_rank_of(ranks, r)) +
                                  ", but in a sequence-parallel run of degree " +
                                  std::to_string(degree) + " (" + model_path + ") ZeRO rank " +
                                  std::to_string(r) + " is sequence-parallel rank " +
                                  std::to_string(r % degree) + ": files of another run?");
        }
    }
}

}  // namespace

std::int64_t recorded_sequence_parallel_degree(const ModelStatesInfo& model) {
    if (model.mp_world_size == 1 && model.tp_degree > 1 && model.pp_degree <= 1)
        return model.tp_degree;
    return 1;
}

bool records_model_parallelism(const ModelStatesInfo& model) {
    const bool tensor = model.tp_degree > 1 && recorded_sequence_parallel_degree(model) == 1;
    return tensor || model.pp_degree > 1 || model.mp_world_size > 1;
}

bool has_sequence_parallel_names(const std::vector<std::string>& names) {
    std::set<std::uint64_t> optim_ranks;
    std::set<std::uint64_t> model_ranks;
    bool above_00 = false;
    for (const std::string& name : names) {
        const CheckpointFileName parsed = parse_checkpoint_file_name(name);
        switch (parsed.role) {
            case CheckpointFileRole::kOptimStates:
                if (!optim_ranks.insert(parsed.dp_rank).second)
                    return false;  // a data-parallel rank under two mp ranks: a grid
                break;
            case CheckpointFileRole::kRankModelStates:
                if (!model_ranks.insert(parsed.dp_rank).second)
                    return false;
                break;
            case CheckpointFileRole::kModelStates:
                if (parsed.mp_rank != 0)
                    return false;
                break;
            case CheckpointFileRole::kPipelineLayer:
            case CheckpointFileRole::kExpertModelStates:
            case CheckpointFileRole::kExpertOptimStates:
                return false;
            default:
                continue;
        }
        above_00 = above_00 || parsed.mp_rank != 0;
    }
    return above_00 && !optim_ranks.empty();
}

std::uint32_t resolve_sequence_parallel(const CheckpointFiles& files,
                                        const ModelStatesInfo& model) {
    const std::string& model_path = files.model_files.front();
    const std::string named = first_named_mp_rank(files);
    std::int64_t degree = recorded_sequence_parallel_degree(model);
    if (!named.empty()) {
        if (model.mp_world_size != 1) {
            throw_unsupported(
                named,
                "names a model-parallel rank above 00 with one file per data-parallel "
                "rank, as DeepSpeed's Ulysses sequence parallelism names its files, but " +
                    model_path + " records " +
                    (model.mp_world_size < 0
                         ? std::string("no mp_world_size")
                         : "mp_world_size " + std::to_string(model.mp_world_size)) +
                    ", not the 1 of a sequence-parallel run: a tensor- or pipeline-"
                    "parallel checkpoint whose other ranks' files are missing");
        }
        if (degree == 1 && model.tp_degree > 0) {
            throw_input_error(named,
                              "names a model-parallel rank above 00, but " + model_path +
                                  " records checkpoint_parallel_dimensions tp_degree " +
                                  std::to_string(model.tp_degree) + " and pp_degree " +
                                  std::to_string(model.pp_degree) +
                                  ": neither a sequence-parallel nor a model-parallel layout");
        }
        if (degree == 1) {
            // DeepSpeed before 0.19.5 recorded no degrees: the names number the sequence-
            // parallel ranks 0..S-1, which the checks below hold to R mod S.
            std::uint64_t highest = 0;
            for (std::size_t i = 0; i < files.optim_files.size(); ++i)
                highest = std::max(highest, mp_rank_of(files.optim_mp_ranks, i));
            for (std::size_t i = 0; i < files.model_files.size(); ++i)
                highest = std::max(highest, mp_rank_of(files.model_mp_ranks, i));
            degree = static_cast<std::int64_t>(highest + 1);
        }
    }
    if (degree <= 1)
        return 1;
    const std::uint64_t world = files.optim_files.size();
    if (static_cast<std::uint64_t>(degree) > world ||
        world % static_cast<std::uint64_t>(degree) != 0) {
        throw_input_error(model_path,
                          "a sequence-parallel run of degree " + std::to_string(degree) +
                              " (mp_world_size 1, checkpoint_parallel_dimensions tp_degree " +
                              std::to_string(model.tp_degree) +
                              ") partitions ZeRO over sequence-parallel x data-parallel ranks, "
                              "a multiple of " +
                              std::to_string(degree) + ", but the tag folder holds " +
                              std::to_string(world) + " optimizer files");
    }
    const auto s = static_cast<std::uint32_t>(degree);
    check_names(files.optim_files, files.optim_mp_ranks, s, model_path);
    if (files.per_rank_model_files)
        check_names(files.model_files, files.model_mp_ranks, s, model_path);
    return s;
}

std::string sequence_parallel_note(std::uint32_t degree, std::uint32_t world,
                                   const std::string& model_path) {
    return "Ulysses sequence parallelism of degree " + std::to_string(degree) + " (" + model_path +
           ": mp_world_size 1): every weight is whole on each sequence-parallel rank and ZeRO "
           "partitions the masters over all " +
           std::to_string(world) + " ranks (" + std::to_string(degree) + " sequence-parallel x " +
           std::to_string(world / degree) + " data-parallel), read as a data-parallel checkpoint";
}

}  // namespace z2f::checkpoint
