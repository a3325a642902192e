// HDF5 output: the byte layout of one `.h5` file, computed in memory before the file exists.
//
// ## The file we produce
//
//   /                              the root group, with three scalar string attributes:
//     @format            = "zero2fp32"
//     @writer            = "zero2fp32-mpi <Hdf5LayoutOptions::writer_version>"
//     @source_checkpoint = <Hdf5LayoutOptions::source_checkpoint>
//   /__names__                     1-D dataset, one fixed-length string per tensor of this file,
//                                  in state-dict order (ascending TensorPlan index)
//   /<state-dict key>              one dataset per tensor, named exactly by its key. A '/' in a
//                                  key creates intermediate groups ("enc/layer.0.weight" is the
//                                  dataset "layer.0.weight" in the group "enc").
//   /<alias key>                   a tied alias whose owner is in the same file: a hard link to
//                                  the owner's dataset (one object, two names, no extra bytes).
//                                  An alias whose owner lives in another file gets a dataset and
//                                  a slot of its own like any other tensor.
//
// Tensor datasets have the tensor's shape (a 0-dim tensor is a scalar dataspace; a shape with a
// zero is an empty dataset without storage, hence without slot), contiguous layout, no filters,
// storage allocated when the dataset is created, fill time "never". Element types, all
// little-endian:
//
//   F64, F32                IEEE binary64 / binary32
//   F16                     IEEE binary16, built from binary32 (sign 15, exponent 10..14 with
//                           bias 15, mantissa 0..9) because HDF5 < 1.14.4 predefines none; it is
//                           the type h5py writes for numpy float16
//   BF16 (default)          uint16 holding the raw bits, with a dataset attribute
//                           @dtype = "bfloat16" (numpy has no bfloat16; see h5py issue #1822)
//   BF16 (bf16_as_float)    a 16-bit float: sign 15, exponent 7..14 with bias 127, mantissa
//                           0..6. HDF5 converts it exactly to float; h5py reads it as float32.
//   I64 I32 I16 I8          signed integers
//   U64 U32 U16 U8          unsigned integers
//   BOOL                    enum over int8 {FALSE = 0, TRUE = 1}: h5py's own encoding of numpy
//                           bool, so h5py returns dtype bool; bytes are torch's 0/1 bytes
//   C64                     compound {r: float32 at 0, i: float32 at 4}: h5py's complex64
//   F8_E4M3, F8_E5M2        uint8 with @dtype = "float8_e4m3fn" / "float8_e5m2" (torch names)
//
// Strings (attributes and __names__) are fixed-length, NUL-padded, UTF-8: the same encoding as
// numpy `S` arrays in h5py (which return them as bytes). Variable-length strings are avoided on
// purpose: they live in a global heap whose unused tail HDF5 does not clear before writing it.
//
// ## How the layout is computed
//
// The file is built by the HDF5 library itself, against an in-memory driver that only records
// what the library writes (hdf5_recording_driver.hpp). Datasets are created with early
// allocation and fill time "never", so the library reserves their address ranges but never
// writes them; H5Dget_offset gives each tensor's slot. After H5Fclose, the recorded metadata
// bytes (plus any unwritten gaps between them, as zeros) become the fixed regions, and the
// end-of-address becomes the file size. The execute phase then writes the fixed regions and
// copies tensor bytes into the slots with pwrite; HDF5 is never involved on the write path.
//
// ## Settings, and why
//
// - Library version bounds (V18, V18): the 1.8 file format (superblock v2, object header v2,
//   link messages with dense link storage for large groups, dense attribute storage when
//   needed). Readable by every HDF5 >= 1.8, including h5py 3.x on HDF5 1.10. The upper bound
//   keeps 1.10-only structures out (superblock v3, new chunk indexes), and pins the format so
//   that a newer library does not silently change our choice.
// - Object time tracking off for the root group, groups and datasets: no timestamps.
// - No variable-length data anywhere; only fixed-length strings (see above).
// - Metadata and small-data aggregation as the sec2 driver does (2 KiB blocks), alignment 1.
// Same inputs and the same HDF5 build give byte-identical layouts on every rank and every run
// (checked by the unit tests, which also perturb malloc to catch uninitialised bytes).
// Different HDF5 versions may place metadata differently; every rank of a job loads the same
// library, so that does not matter for us.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "output/output_layout.hpp"
#include "plan/tensor_plan.hpp"

namespace z2f::output {

struct Hdf5LayoutOptions {
    // Written as "zero2fp32-mpi <writer_version>" in the root attribute `writer` (just
    // "zero2fp32-mpi" when empty).
    std::string writer_version;
    // Written as is in the root attribute `source_checkpoint` (e.g. the checkpoint directory).
    std::string source_checkpoint;
    // Store bf16 tensors as a 16-bit HDF5 float instead of uint16 + @dtype="bfloat16".
    bool bf16_as_float = false;
};

// Name of the dataset listing the file's tensor names. A tensor with this exact name cannot be
// stored in HDF5 output.
inline constexpr std::string_view kHdf5NamesDataset = "__names__";

// Lays out one HDF5 file holding the tensors `tensor_indices` (indices into plan.tensors, any
// order, no duplicates) of `plan`. Pure: no file is touched. Throws z2f::Error: kUnsupported
// for tensor names that cannot be HDF5 paths (empty components, ".", "..", a name that is also
// a group of another name, duplicates, kHdf5NamesDataset), kInternal for broken invariants or
// HDF5 failures.
OutputFileLayout layout_hdf5_file(std::string file_name, const plan::TensorPlan& plan,
                                  std::span<const std::uint32_t> tensor_indices,
                                  const Hdf5LayoutOptions& options);

}  // namespace z2f::output
