#include "support/universal_expectation.hpp"

#include <stdexcept>

#include "support/expected_state.hpp"

namespace z2f::testing {
namespace {

// A saved flat tensor's elements as float32 bytes.
std::vector<std::byte> flat_f32(const checkpoint::CheckpointMeta& meta,
                                const checkpoint::TensorRef& ref) {
    return widen_to_f32(ref.dtype, read_range(meta.inputs.at(ref.file), ref.offset, ref.length));
}

// Rank r's flat tensors of stream s (0 master, 1 exp_avg, 2 exp_avg_sq), in group order.
std::vector<checkpoint::TensorRef> stream_of(const checkpoint::OptimStatesInfo& optim,
                                             std::size_t s) {
    if (s == 0)
        return optim.master;
    std::vector<checkpoint::TensorRef> refs;
    for (const checkpoint::OptimizerGroupState& group : optim.group_states) {
        const auto& moment = s == 1 ? group.exp_avg : group.exp_avg_sq;
        if (!moment)
            throw std::runtime_error("a flat group without Adam moments");
        refs.push_back(*moment);
    }
    return refs;
}

void append(std::vector<std::byte>& to, const std::vector<std::byte>& bytes, std::uint64_t first,
            std::uint64_t count) {
    if ((first + count) * 4 > bytes.size())
        throw std::runtime_error("a parameter runs past its flat tensor");
    to.insert(to.end(), bytes.begin() + static_cast<std::ptrdiff_t>(first * 4),
              bytes.begin() + static_cast<std::ptrdiff_t>((first + count) * 4));
}

std::uint64_t numel_of_shape(const std::vector<std::uint64_t>& shape) {
    std::uint64_t n = 1;
    for (std::uint64_t d : shape)
        n *= d;
    return n;
}

}  // namespace

std::vector<ExpectedUniversalParam> expected_universal_params(
    const checkpoint::CheckpointMeta& meta) {
    const bool stage3 = meta.layout == checkpoint::MasterLayout::kPerParam;
    const auto& shapes = *meta.model.param_shapes;
    const std::uint32_t world = meta.world_size;
    std::vector<ExpectedUniversalParam> params;
    for (const auto& group : shapes) {
        for (const checkpoint::NamedShape& shape : group) {
            ExpectedUniversalParam param;
            param.name = shape.name;
            const std::uint64_t n = numel_of_shape(shape.shape);
            param.shape = stage3                ? std::vector<std::uint64_t>{n}
                          : shape.shape.empty() ? std::vector<std::uint64_t>{1}
                                                : shape.shape;
            params.push_back(std::move(param));
        }
    }
    for (std::size_t s = 0; s < 3; ++s) {
        if (stage3) {
            // Per rank, every sub-group's flat tensor in order; one running offset.
            std::vector<std::vector<std::byte>> rank_flat(world);
            for (std::uint32_t r = 0; r < world; ++r) {
                for (const checkpoint::TensorRef& ref : stream_of(meta.optim[r], s)) {
                    std::vector<std::byte> bytes = flat_f32(meta, ref);
                    rank_flat[r].insert(rank_flat[r].end(), bytes.begin(), bytes.end());
                }
            }
            std::uint64_t offset = 0;
            std::size_t index = 0;
            for (const auto& group : shapes) {
                for (const checkpoint::NamedShape& shape : group) {
                    const std::uint64_t n = numel_of_shape(shape.shape);
                    const std::uint64_t c = (n + world - 1) / world;
                    std::vector<std::byte>& out = params[index++].streams[s];
                    for (std::uint32_t r = 0; r < world; ++r) {
                        const std::uint64_t begin = std::min<std::uint64_t>(r * c, n);
                        const std::uint64_t end = std::min<std::uint64_t>((r + 1) * c, n);
                        append(out, rank_flat[r], offset, end - begin);
                    }
                    offset += c;
                }
            }
        } else {
            std::size_t index = 0;
            for (std::size_t g = 0; g < shapes.size(); ++g) {
                // The ranks' tensors of group g, concatenated: padding only at the end.
                std::vector<std::byte> flat;
                for (std::uint32_t r = 0; r < world; ++r) {
                    std::vector<std::byte> bytes =
                        flat_f32(meta, stream_of(meta.optim[r], s).at(g));
                    flat.insert(flat.end(), bytes.begin(), bytes.end());
                }
                std::uint64_t offset = 0;
                for (const checkpoint::NamedShape& shape : shapes[g]) {
                    const std::uint64_t n = numel_of_shape(shape.shape);
                    append(params[index++].streams[s], flat, offset, n);
                    offset += n;
                }
            }
        }
    }
    return params;
}

}  // namespace z2f::testing
