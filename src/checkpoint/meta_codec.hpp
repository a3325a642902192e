// The checkpoint's payloads between ranks, on the wire codec (common/wire_codec.hpp), one codec
// for every kind of input:
//   - the discovered files, broadcast by rank 0: a data-parallel folder (CheckpointFiles), a
//     file grid (FileGrid) or a universal folder (UniversalFolder: its CheckpointFiles, then
//     the parameter folders);
//   - the interpreted metadata of each input file (FileMeta, file_meta.hpp): rank r interprets
//     inputs r, r+P, ... and every rank all-gathers the encoded results.
//
// Fields are written in declaration order of the structs in discovery.hpp, file_grid.hpp,
// universal_discovery.hpp, checkpoint_meta.hpp, parallel_meta.hpp and file_meta.hpp. A FileMeta is
// its size (u64), a kind byte (model, optimizer, state dict), the kind's content, then the file's
// storage records (file u32, offset u64, length u64, crc32 u32, name, no-crc flag). Model content
// is the ModelStatesInfo then its extras (universal_checkpoint_info, num_experts, plain-optimizer
// flag, ZeRO-0 masters); optimizer content the OptimStatesInfo then its extras (param groups'
// names, moe flags and slice mappings); a state dict its named tensors. Tensors are (file u32,
// dtype enum, shape dims, numel, offset, length); a double is the u64 of its bits; the
// pickled-value graph of an optimizer file's global state is its nodes in order (kind, integer, the
// double's bits, text, name, child indices as u32, via_newobj, has_state), every child index below
// its node's own, then the kept entries (key, key node, value node) and param_groups. Decoding
// checks every length and enumerator: a malformed buffer is an internal error.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "checkpoint/discovery.hpp"
#include "checkpoint/file_grid.hpp"
#include "checkpoint/file_meta.hpp"
#include "checkpoint/universal_discovery.hpp"
#include "common/wire_codec.hpp"

namespace z2f::checkpoint {

std::vector<std::byte> encode_files(const CheckpointFiles& files);
CheckpointFiles decode_files(std::span<const std::byte> bytes);

std::vector<std::byte> encode_universal_folder(const UniversalFolder& folder);
UniversalFolder decode_universal_folder(std::span<const std::byte> bytes);

std::vector<std::byte> encode_file_grid(const FileGrid& grid);
FileGrid decode_file_grid(std::span<const std::byte> bytes);

void encode_file_meta(const FileMeta& meta, WireWriter& out);
// Decodes one FileMeta at the reader's position.
FileMeta decode_file_meta(WireReader& in);

}  // namespace z2f::checkpoint
