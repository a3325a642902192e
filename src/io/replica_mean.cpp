#include "io/replica_mean.hpp"

#include <algorithm>
#include <string>

#include "common/errors.hpp"
#include "io/dtype_convert.hpp"

namespace z2f::io {
namespace {

constexpr std::size_t kBatch = 1024;  // elements converted to float at a time

// Rounds `values` to `dtype` and back (a no-op for float32).
void round_to(DType dtype, std::span<float> values, std::span<std::byte> scratch) {
    if (dtype == DType::kF32)
        return;
    auto as_bytes = std::as_writable_bytes(values);
    convert_elements(DType::kF32, as_bytes, dtype, scratch);
    convert_elements(dtype, scratch, DType::kF32, as_bytes);
}

// Bytes [done, done + length) of a stream (the concatenation of `extents`), read into `out`.
void read_stream(InputFiles& inputs, const std::vector<SourceExtent>& extents, std::uint64_t done,
                 std::span<std::byte> out) {
    std::uint64_t position = 0;
    std::size_t filled = 0;
    for (const SourceExtent& extent : extents) {
        const std::uint64_t from = std::max(done + filled, position);
        const std::uint64_t to =
            std::min<std::uint64_t>(done + out.size(), position + extent.length);
        if (to > from) {
            inputs.get(extent.file)
                .read_exact(extent.offset + (from - position),
                            out.subspan(filled, static_cast<std::size_t>(to - from)));
            filled += static_cast<std::size_t>(to - from);
        }
        position += extent.length;
        if (filled == out.size())
            return;
    }
    if (filled != out.size())
        throw_internal_error("replica stream shorter than its mean");
}

}  // namespace

void replica_mean(DType dtype, std::span<const std::span<const std::byte>> replicas,
                  std::span<std::byte> out) {
    if (dtype != DType::kF32 && dtype != DType::kBF16 && dtype != DType::kF16) {
        throw Error(ErrorKind::kUnsupported,
                    std::string("averaging replicas of ") + std::string(dtype_display_name(dtype)) +
                        " tensors is not supported (float32, bfloat16 and float16 are)");
    }
    if (replicas.empty())
        throw_internal_error("the mean of no replica");
    const std::size_t item = dtype_size(dtype);
    const std::size_t count = out.size() / item;
    float acc[kBatch];
    float next[kBatch];
    std::byte narrow[kBatch * 4];
    for (std::size_t begin = 0; begin < count; begin += kBatch) {
        const std::size_t n = std::min(kBatch, count - begin);
        const std::span<float> sum(acc, n);
        const std::span<float> value(next, n);
        const std::span<std::byte> scratch(narrow, n * item);
        auto load = [&](std::size_t replica, std::span<float> into) {
            convert_elements(dtype, replicas[replica].subspan(begin * item, n * item), DType::kF32,
                             std::as_writable_bytes(into));
        };
        load(0, sum);
        for (float& x : sum)
            x = 0.0f + x;  // Python's sum() starts from 0
        for (std::size_t r = 1; r < replicas.size(); ++r) {
            load(r, value);
            for (std::size_t i = 0; i < n; ++i)
                sum[i] = sum[i] + value[i];
            round_to(dtype, sum, scratch);
        }
        const auto divisor = static_cast<float>(replicas.size());
        for (float& x : sum)
            x = x / divisor;
        convert_elements(DType::kF32, std::as_bytes(sum), dtype,
                         out.subspan(begin * item, n * item));
    }
}

void stream_replica_mean(InputFiles& inputs, std::span<const std::vector<SourceExtent>> replicas,
                         DType dtype, std::span<std::byte> scratch,
                         const std::function<void(std::span<const std::byte>)>& emit) {
    const std::size_t item = dtype_size(dtype);
    const std::size_t chunk = scratch.size() / (replicas.size() + 1) / item * item;
    if (chunk == 0)
        throw_internal_error("no room for one element of each replica");
    std::uint64_t total = 0;
    for (const SourceExtent& extent : replicas.front())
        total += extent.length;
    std::vector<std::span<const std::byte>> views(replicas.size());
    for (std::uint64_t done = 0; done < total;) {
        const auto length = static_cast<std::size_t>(std::min<std::uint64_t>(chunk, total - done));
        for (std::size_t r = 0; r < replicas.size(); ++r) {
            std::span<std::byte> into = scratch.subspan(r * chunk, length);
            read_stream(inputs, replicas[r], done, into);
            views[r] = into;
        }
        std::span<std::byte> mean = scratch.subspan(replicas.size() * chunk, length);
        replica_mean(dtype, views, mean);
        emit(mean);
        done += length;
    }
}

}  // namespace z2f::io
