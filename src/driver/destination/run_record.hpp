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
//   - the tag folder, the tag, every input file with its size, and the output-shaping options
//     one by one: `--verify` and `--resume` take the options from here instead of from the
//     command line (destination/record_phase.hpp), and `--resume` names what differs when the
//     record is of another run;
//   - per planned output file its size and the length and CRC-32 of its header (the layout's
//     first fixed region), and the index's name.
// Input modification times are not recorded: a checkpoint rewritten in place with files of
// identical sizes is not detected by --resume (--verify compares every byte).
//
// Format: JSON, {"tool": "zero2fp32-mpi", "version": ..., "state": "writing"|"complete",
//   "checkpoint": "<tag folder>", "tag": ..., "inputs": [{"path", "size"}, ...], "options":
//   {"format", "dtype", "max_shard_size" (bytes or "none"), "cast_all_buffers",
//   "keep_frozen_dtype", "stage1_frozen", "exclude_frozen", "untie", "include": [...], "exclude":
//   [...], "strip_prefix": [...], "hdf5_bf16"}, "run": "<identity text>", "index": name|null,
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

struct ManifestInput {
    std::string path;
    std::uint64_t size = 0;
    friend bool operator==(const ManifestInput&, const ManifestInput&) = default;
};

struct RunManifest {
    std::string version;  // of the writer
    bool complete = false;
    std::string tag_dir;  // absolute
    std::string tag;
    // Every input file read, with its size (empty in records of versions before 0.2: the run
    // identity then stands alone).
    std::vector<ManifestInput> inputs;
    Options shape;             // only the output-shaping fields (ShapeOption) are recorded
    std::string run_identity;  // canonical text: checkpoint, tag, inputs, output options
    std::optional<std::string> index_name;
    std::vector<ManifestFile> files;
};

std::string encode_manifest(const RunManifest& manifest);
// nullopt when the text is not a record of this tool (corrupt, foreign).
std::optional<RunManifest> decode_manifest(const std::string& text);

// What makes `recorded` a record of another run than `planned` would write (--resume refuses
// to continue it): one line per difference, "checkpoint: '/a/global_step2' recorded,
// '/b/global_step2' now", "input '.../x.pt': 1,234 bytes recorded, 5,678 now", "--dtype: bf16
// recorded, fp32 now". Empty when both describe the same run (the writer's version aside).
std::vector<std::string> run_differences(const RunManifest& recorded, const RunManifest& planned);

}  // namespace z2f::driver
