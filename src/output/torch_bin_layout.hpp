// Layout of a PyTorch `.bin` output file (pytorch_model.bin, pytorch_model-0000k-of-0000n.bin):
// the archive torch.save(state_dict, path) writes, with every offset known before any tensor
// byte exists.
//
// Byte format: a torch zip archive (container/zip_writer.hpp has the zip bytes) whose records
// all live in the folder <archive> = file name without its extension, in this order:
//
//   <archive>/data.pkl    protocol-2 pickle of a plain dict {name: tensor} in the order of
//                         `tensor_indices`; each tensor is
//                         _rebuild_tensor_v2(storage, 0, shape, contiguous strides, False,
//                         OrderedDict()) with the storage persistent id
//                         ('storage', torch.<X>Storage, "<k>", 'cpu', numel). Only GLOBALs on
//                         torch's weights_only allow-list appear: collections OrderedDict,
//                         torch._utils _rebuild_tensor_v2, torch <X>Storage.
//   <archive>/byteorder   "little" (torch >= 2.1 writes it; older torch ignores it)
//   <archive>/data/<k>    k = 0, 1, ... in order of first reference in the pickle: one storage
//                         per distinct tensor, holding exactly that tensor's output bytes
//                         (row-major, output dtype, little-endian)
//   <archive>/version     "3\n" (torch's kMinProducedFileFormatVersion, written last as
//                         writeEndOfFile does)
//   then the central directory and the ZIP64 + classic end records.
//
// No .data/serialization_id (torch writes a random-ish one; readers only log it), so the bytes
// are a pure function of the plan and the tensor data.
//
// Tied weights: an alias (alias_of >= 0) whose owner is in the same file references the
// owner's storage key, so torch.load returns two tensors sharing memory and the bytes are stored
// once. An alias whose owner sits in another file gets a storage of its own, filled with the
// owner's bytes (its slot names the owner, the tensor whose extents hold the data).
//
// What is fixed and what is not (see output_layout.hpp):
//   fixed regions  every local header, and the whole of data.pkl, byteorder and version
//                  (header, data and data descriptor: their CRCs are known up front)
//   slots          the data of each data/<k> record, one slot per storage, in file order
//   tail           (crc_tail) the data descriptor after each non-empty storage, the central
//                  directory and the end records: their offsets are fixed, only the CRC bytes
//                  wait for the data. layout.size already counts them.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "output/output_layout.hpp"
#include "plan/tensor_plan.hpp"

namespace z2f::output {

// Lays out one `.bin` file holding plan.tensors[i] for i in `tensor_indices`, in that order.
// Throws an unsupported error for a dtype torch has no typed storage for, and an internal error
// for inconsistent input (index out of range, a tensor listed twice, an alias whose dtype or
// element count differs from its owner's).
OutputFileLayout layout_torch_bin_file(std::string file_name, const plan::TensorPlan& plan,
                                       std::span<const std::uint32_t> tensor_indices);

// crc_tail (output_layout.hpp) builds the tail of these layouts: one region per data
// descriptor of a non-empty storage, then one region with the central directory and the end
// records. Together with the fixed regions and the slots they cover [0, layout.size) exactly.

}  // namespace z2f::output
