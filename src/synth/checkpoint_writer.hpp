// Writing a synthetic checkpoint to disk, one file at a time, in DeepSpeed's layout
// (docs/deepspeed-format.md §1):
//
//   OUT/latest                                              the tag, no newline
//   OUT/<tag>/[bf16_]zero_pp_rank_R_mp_rank_00_optim_states.pt   R = 0..W-1
//   OUT/<tag>/mp_rank_00_model_states.pt                          stage 2
//   OUT/<tag>/zero_pp_rank_R_mp_rank_00_model_states.pt           stage 3, R = 0..W-1
//
// Each .pt is a torch zip archive (archive folder = the file's stem) holding data.pkl, then
// data/<key> records in torch's order, then version; torch 2.x style adds .format_version,
// .storage_alignment and byteorder after data.pkl and .data/serialization_id at the end.
// Record data starts on 64-byte boundaries (container/zip_writer.hpp). Every byte is a pure
// function of the options, so any split of the files over processes writes the same checkpoint.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "synth/synth_options.hpp"

namespace z2f::synth {

struct SynthFile {
    std::string name;  // inside the tag folder
    bool optim = false;
    std::uint32_t rank = 0;
};

// Every file of the tag folder: the optimizer files in rank order, then the model file(s).
// Distributing this list round-robin over processes balances the large files first.
std::vector<SynthFile> checkpoint_files(const SynthContext& context);

struct WrittenFile {
    std::uint64_t size = 0;           // bytes of the file
    std::uint64_t bytes_written = 0;  // data actually written (holes excluded)
};

// Writes one file into `tag_dir` (which must exist), replacing any file of that name.
WrittenFile write_checkpoint_file(const SynthContext& context, const SynthFile& file,
                                  const std::string& tag_dir);

// `*_states.pt` files in `tag_dir` that this checkpoint does not write: left there they would
// make the folder an inconsistent checkpoint, so the caller refuses to start.
std::vector<std::string> foreign_state_files(const SynthContext& context,
                                             const std::string& tag_dir);

// OUT/latest = tag (written atomically, no newline, as DeepSpeed does).
void write_latest(const std::string& checkpoint_dir, const std::string& tag);

// The whole checkpoint from one process: the tag folder, every file, then `latest`. Refuses a
// tag folder holding state files of another checkpoint (output error).
void write_checkpoint(const SynthContext& context, const std::string& checkpoint_dir);

}  // namespace z2f::synth
