// The input CRC check across ranks (run/input_check.hpp for what is checked).
//
// Each rank checksums its pieces while it copies (or verifies) and then reads its extra
// pieces; `agree_input_check` all-gathers the pieces' CRCs, (piece u32, crc u32) per piece a
// rank computed, on the wire codec, and joins them on every rank, so that every rank knows the
// same failed records without another round.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "driver/execute/executor.hpp"
#include "driver/phase_runner.hpp"
#include "run/input_check.hpp"

namespace z2f::driver {

// The check of this run, or nothing with --no-input-crc. Rank 0 says once which records carry
// no CRC and so are not checked.
std::optional<InputCheck> prepare_input_check(PhaseRunner& phases, const run::RunPlan& plan,
                                              const Options& options);

// Collective. A malformed payload (a piece index out of range, or a piece another rank owns)
// is an internal error.
std::vector<run::FailedRecord> agree_input_check(const mpi::Communicator& comm,
                                                 const run::RunPlan& plan, const InputCheck& check);

}  // namespace z2f::driver
