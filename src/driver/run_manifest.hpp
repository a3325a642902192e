// The run record ("run manifest"): a hidden side file of OUT_DIR, the one place where a run
// writes down what shaped its bytes, so that the output files themselves stay byte for byte
// what Hugging Face writes.
//
// Rank 0 writes it atomically before any output file (state "writing") and, after the index,
// once more with state "complete"; it is kept after success. It records
//   - the run's identity, a canonical text built by the RunPlan (the tag folder, every input
//     file's path and size, the options that shape the output bytes): `--resume` trusts an
//     existing file only when the record is of this version and of the same run, and the file
//     has the planned name, size and header bytes;
//   - the tag folder, the tag and the output-shaping options one by one: `--verify` takes
//     them from here instead of from the command line (output_shape.hpp);
//   - per planned output file its size and the length and CRC-32 of its header (the layout's
//     first fixed region), and the index's name.
// Input modification times are not recorded: a checkpoint rewritten in place with files of
// identical sizes is not detected by --resume (--verify compares every byte).
//
// Format: JSON, {"tool": "zero2fp32-mpi", "version": ..., "state": "writing"|"complete",
//   "checkpoint": "<tag folder>", "tag": ..., "options": {"format", "dtype", "max_shard_size"
//   (bytes or "none"), "cast_all_buffers", "keep_frozen_dtype", "stage1_frozen",
//   "exclude_frozen", "untie", "include": [...], "exclude": [...], "strip_prefix": [...],
//   "hdf5_bf16"}, "run": "<identity text>", "index": name|null,
//   "files": [{"name", "size", "header_length", "header_crc32"}, ...]}
// A record of another tool, or one that does not parse, is no record.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "zero2fp32/options.hpp"

namespace z2f::driver {

inline constexpr const char* kManifestName = ".zero2fp32-run.json";

struct ManifestFile {
    std::string name;
    std::uint64_t size = 0;
    std::uint64_t header_length = 0;
    std::uint32_t header_crc32 = 0;
    friend bool operator==(const ManifestFile&, const ManifestFile&) = default;
};

struct RunManifest {
    std::string version;  // of the writer
    bool complete = false;
    std::string tag_dir;  // absolute
    std::string tag;
    Options shape;             // only the output-shaping fields (ShapeOption) are recorded
    std::string run_identity;  // canonical text: checkpoint, tag, inputs, output options
    std::optional<std::string> index_name;
    std::vector<ManifestFile> files;
};

std::string encode_manifest(const RunManifest& manifest);
// nullopt when the text is not a record of this tool (corrupt, foreign).
std::optional<RunManifest> decode_manifest(const std::string& text);

}  // namespace z2f::driver
