// The checkpoint's payloads between ranks, on the wire codec (common/wire_codec.hpp):
//   - the discovered file list, broadcast by rank 0 (CheckpointFiles);
//   - the interpreted metadata of each input file (FileMeta): rank r interprets files
//     r, r+P, ... and every rank all-gathers the encoded results.
//
// Fields are written in declaration order of the structs in discovery.hpp and
// checkpoint_meta.hpp; tensors as (file u32, dtype enum, shape dims, numel, offset, length); the
// pickled-value graph of an optimizer file's global state as its nodes in order (kind, integer,
// the double's bits, text, name, child indices as u32, via_newobj, has_state), every child index
// below its node's own, then the kept entries (key, key node, value node) and param_groups; a
// file's storage records last (file u32, offset u64, length u64, crc32 u32, name).
// Decoding checks every length and enumerator: a malformed buffer is an internal error.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "checkpoint/assemble.hpp"
#include "common/wire_codec.hpp"

namespace z2f::checkpoint {

std::vector<std::byte> encode_files(const CheckpointFiles& files);
CheckpointFiles decode_files(std::span<const std::byte> bytes);

void encode_file_meta(const FileMeta& meta, WireWriter& out);
// Decodes one FileMeta at the reader's position.
FileMeta decode_file_meta(WireReader& in);

// The pieces FileMeta is made of, for the payloads of parallel checkpoints
// (parallel_meta_codec.hpp).
void encode_model_states(const ModelStatesInfo& model, WireWriter& out);
ModelStatesInfo decode_model_states(WireReader& in);
void encode_optim_states(const OptimStatesInfo& optim, WireWriter& out);
OptimStatesInfo decode_optim_states(WireReader& in);
void encode_named_tensors(const std::vector<NamedTensor>& tensors, WireWriter& out);
std::vector<NamedTensor> decode_named_tensors(WireReader& in);
// A file's storage records: (file u32, offset u64, length u64, crc32 u32, name) each.
void encode_records(const std::vector<InputRecord>& records, WireWriter& out);
std::vector<InputRecord> decode_records(WireReader& in);

}  // namespace z2f::checkpoint
