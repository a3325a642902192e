// The payloads of a parallel checkpoint between ranks, on the wire codec
// (common/wire_codec.hpp): the file grid, broadcast by rank 0, and each input's
// ParallelFileMeta, all-gathered. Fields in declaration order of file_grid.hpp and
// parallel_meta.hpp; ModelStatesInfo, OptimStatesInfo and tensors as meta_codec writes them; a
// double as the u64 of its bits. Decoding checks every length and enumerator: a malformed
// buffer is an internal error.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "checkpoint/parallel_meta.hpp"
#include "common/wire_codec.hpp"

namespace z2f::checkpoint {

std::vector<std::byte> encode_file_grid(const FileGrid& grid);
FileGrid decode_file_grid(std::span<const std::byte> bytes);

void encode_parallel_file_meta(const ParallelFileMeta& meta, WireWriter& out);
ParallelFileMeta decode_parallel_file_meta(WireReader& in);

}  // namespace z2f::checkpoint
