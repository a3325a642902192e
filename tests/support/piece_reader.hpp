// Serial execution of pieces for tests: reads every piece's sources straight from the input
// files and assembles the tensor's source bytes, checking replicas (kCheckEqual) and averaging
// them (kAverage, fp32 only) - the reference for what the copy engine must do with pieces.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "plan/tensor_piece.hpp"
#include "plan/tensor_plan.hpp"

namespace z2f::testing {

struct PieceResult {
    std::vector<std::byte> bytes;  // source dtype
    // First replica mismatch: empty when every kCheckEqual piece held equal replicas.
    std::string mismatch;
    double largest_difference = 0.0;  // over mismatching fp32 elements
};

PieceResult read_pieces(const plan::TensorPlan& plan, const plan::PlannedTensor& tensor,
                        const std::vector<plan::TensorPiece>& pieces);

}  // namespace z2f::testing
