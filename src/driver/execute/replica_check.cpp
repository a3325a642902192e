#include "driver/execute/replica_check.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

#include "common/errors.hpp"
#include "io/dtype_convert.hpp"

namespace z2f::driver {
namespace {

bool needs_check(const plan::TensorPiece& piece) {
    return piece.combine == plan::PieceCombine::kCheckEqual && piece.sources.size() > 1;
}

std::uint64_t check_bytes(const plan::PlannedTensor& tensor) {
    std::uint64_t bytes = 0;
    for (const plan::TensorPiece& piece : tensor.pieces) {
        if (needs_check(piece))
            bytes += piece.rows * piece.row_bytes * piece.sources.size();
    }
    return bytes;
}

// The worst difference found between copy 0 and copy `copy` of one tensor.
struct Difference {
    bool found = false;
    double largest = 0.0;
    std::uint64_t element = 0;  // tensor element of the largest difference
    std::uint32_t copy = 0;
};

class TensorChecker {
  public:
    TensorChecker(io::InputFiles& inputs, std::size_t buffer_size) : inputs_(inputs) {
        // Half for copy 0, half for the copy compared with it; whole elements only.
        half_ = std::max<std::size_t>(buffer_size / 2 / 8 * 8, 8);
        reference_.resize(half_);
        other_.resize(half_);
    }

    Difference check(const plan::PlannedTensor& tensor) {
        Difference worst;
        item_ = dtype_size(tensor.source_dtype);
        dtype_ = tensor.source_dtype;
        for (const plan::TensorPiece& piece : tensor.pieces) {
            if (!needs_check(piece))
                continue;
            // Contiguous rows are compared as one range, strided ones row by row.
            if (piece.source_stride == piece.row_bytes || piece.rows == 1) {
                compare_range(piece, piece.source_offset, piece.rows * piece.row_bytes, worst);
            } else {
                for (std::uint64_t row = 0; row < piece.rows; ++row) {
                    compare_range(piece, piece.source_offset + row * piece.source_stride,
                                  piece.row_bytes, worst);
                }
            }
        }
        return worst;
    }

  private:
    // Stream bytes [begin, begin + length) of every copy of `piece`: one row, or whole rows of
    // a piece whose rows are contiguous in the stream.
    void compare_range(const plan::TensorPiece& piece, std::uint64_t begin, std::uint64_t length,
                       Difference& worst) {
        const std::uint64_t step = half_ - half_ % item_;
        for (std::uint64_t done = 0; done < length; done += step) {
            throw_if_interrupted();
            const std::uint64_t n = std::min<std::uint64_t>(step, length - done);
            read(piece.sources[0], begin + done, n, reference_.data());
            for (std::uint32_t copy = 1; copy < piece.sources.size(); ++copy) {
                read(piece.sources[copy], begin + done, n, other_.data());
                if (std::memcmp(reference_.data(), other_.data(), n) != 0)
                    measure(piece, begin + done, n, copy, worst);
            }
        }
    }

    // The tensor byte that stream byte `at` of `piece` fills.
    static std::uint64_t tensor_byte(const plan::TensorPiece& piece, std::uint64_t at) {
        const std::uint64_t relative = at - piece.source_offset;
        const std::uint64_t row = piece.source_stride == 0 ? 0 : relative / piece.source_stride;
        return piece.offset + row * piece.stride + (relative - row * piece.source_stride);
    }

    // Buffers hold `n` bytes from stream byte `at`.
    void measure(const plan::TensorPiece& piece, std::uint64_t at, std::uint64_t n,
                 std::uint32_t copy, Difference& worst) {
        for (std::uint64_t b = 0; b + item_ <= n; b += item_) {
            if (std::memcmp(&reference_[b], &other_[b], item_) == 0)
                continue;
            double d = std::fabs(io::element_value(dtype_, &other_[b]) -
                                 io::element_value(dtype_, &reference_[b]));
            if (std::isnan(d))
                d = std::numeric_limits<double>::infinity();
            if (!worst.found || d > worst.largest) {
                worst.found = true;
                worst.largest = d;
                worst.element = tensor_byte(piece, at + b) / item_;
                worst.copy = copy;
            }
        }
    }

    void read(const std::vector<SourceExtent>& stream, std::uint64_t begin, std::uint64_t n,
              std::byte* out) {
        for (const SourceExtent& extent : plan::slice_stream(stream, begin, n)) {
            inputs_.get(extent.file).read_exact(extent.offset, {out, extent.length});
            out += extent.length;
        }
    }

    io::InputFiles& inputs_;
    std::size_t half_ = 0;
    std::size_t item_ = 1;
    DType dtype_ = DType::kF32;
    std::vector<std::byte> reference_;
    std::vector<std::byte> other_;
};

std::string first_file(const run::RunPlan& plan, const plan::PlannedTensor& tensor,
                       std::uint32_t copy) {
    for (const plan::TensorPiece& piece : tensor.pieces) {
        if (needs_check(piece) && copy < piece.sources.size() && !piece.sources[copy].empty())
            return plan.tensors.inputs.at(piece.sources[copy].front().file).path;
    }
    return "?";
}

std::string describe(const run::RunPlan& plan, const plan::PlannedTensor& tensor,
                     const Difference& difference) {
    std::ostringstream text;
    text << "'" << tensor.name << "': the copies in " << first_file(plan, tensor, 0) << " and "
         << first_file(plan, tensor, difference.copy) << " differ (largest difference "
         << difference.largest << " at element " << difference.element << ")";
    if (tensor.merge.find("replicated") != std::string::npos)
        text << "; --tp-replicated first takes TP rank 0's copy instead";
    return text.str();
}

}  // namespace

std::vector<ReplicaCheck> plan_replica_checks(const run::RunPlan& plan, std::uint32_t ranks) {
    std::vector<ReplicaCheck> checks;
    for (std::uint32_t t = 0; t < plan.tensors.tensors.size(); ++t) {
        std::uint64_t bytes = check_bytes(plan.tensors.tensors[t]);
        if (bytes > 0)
            checks.push_back({t, 0, bytes});
    }
    // Largest first to the least-loaded rank; ties by tensor order, so every rank agrees.
    std::vector<std::size_t> order(checks.size());
    for (std::size_t i = 0; i < order.size(); ++i)
        order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        return checks[a].bytes > checks[b].bytes;
    });
    std::vector<std::uint64_t> load(std::max<std::uint32_t>(ranks, 1), 0);
    for (std::size_t i : order) {
        auto least =
            static_cast<std::uint32_t>(std::min_element(load.begin(), load.end()) - load.begin());
        checks[i].rank = least;
        load[least] += checks[i].bytes;
    }
    return checks;
}

std::vector<std::string> check_replicas_of(const run::RunPlan& plan, std::uint32_t rank,
                                           io::InputFiles& inputs, std::size_t buffer_size) {
    std::vector<std::string> mismatches;
    TensorChecker checker(inputs, buffer_size);
    for (const ReplicaCheck& check : plan_replica_checks(plan, plan.ranks)) {
        if (check.rank != rank)
            continue;
        const plan::PlannedTensor& tensor = plan.tensors.tensors.at(check.tensor);
        Difference difference = checker.check(tensor);
        if (difference.found)
            mismatches.push_back(describe(plan, tensor, difference));
    }
    return mismatches;
}

bool check_replicas(PhaseRunner& phases, const run::RunPlan& plan, const Options& options) {
    if (plan_replica_checks(plan, plan.ranks).empty())
        return true;
    io::InputFiles inputs(plan.tensors.inputs, io::InputFiles::default_capacity());
    return phases.run("replicas", [&] {
        std::vector<std::string> mismatches = check_replicas_of(
            plan, phases.rank(), inputs, static_cast<std::size_t>(options.buffer_size));
        if (mismatches.empty())
            return;
        std::string message = "the copies of a replicated or tied tensor are not bit-equal: ";
        if (mismatches.size() == 1) {
            message += mismatches.front();
        } else {
            message = "the copies of " + std::to_string(mismatches.size()) +
                      " replicated or tied tensors are not bit-equal:";
            for (const std::string& line : mismatches)
                message += "\n  " + line;
        }
        throw Error(ErrorKind::kInput, message);
    });
}

}  // namespace z2f::driver
