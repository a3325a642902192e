// The run manifest: a hidden file in OUT_DIR that lets `--resume` trust outputs of an
// interrupted run, and nothing else.
//
// Written by rank 0 before any output file (atomically), removed after the index on success.
// It records what the run is, as a canonical text built by the driver (the tag folder, every
// input file's path and size, and the options that shape the output bytes), and, per planned
// output file, its size and the length and CRC-32 of its header (the layout's first fixed
// region). Input modification times are not recorded: a checkpoint rewritten in place with
// files of identical sizes is not detected. On `--resume`, an existing output file is skipped
// only if the manifest describes the same run and the file has the planned name, size and header
// bytes. Output files get their final name only after being fsynced, so a final-named file of
// the same run is complete.
//
// Format: JSON, {"tool": "zero2fp32-mpi", "version": ..., "run": "<identity text>",
//               "files": [{"name": ..., "size": ..., "header_length": ...,
//                          "header_crc32": ...}, ...]}
// A manifest of another tool or another version of this one is ignored.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

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
    std::string run_identity;  // canonical text: checkpoint, tag, inputs, output options
    std::vector<ManifestFile> files;
};

std::string encode_manifest(const RunManifest& manifest);
// nullopt when the text is not a manifest of this tool (corrupt, foreign, other version).
std::optional<RunManifest> decode_manifest(const std::string& text);

}  // namespace z2f::driver
