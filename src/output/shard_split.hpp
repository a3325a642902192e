// The Hugging Face shard split: which output file every tensor goes to, and the file names.
// A faithful copy of huggingface_hub's `split_state_dict_into_shards_factory`
// (docs/output-formats.md §4.1), which DeepSpeed's zero_to_fp32.py and transformers use, so
// that the `weight_map` of our index equals theirs for the same state dict and limit.
//
// The walk, over the tensors in state-dict order:
// 1. A tensor that shares its storage with an earlier one (an alias, `storage_of` >= 0) is set
//    aside; it adds no bytes and opens no shard.
// 2. A tensor bigger than the limit becomes a shard of its own, appended to the shard list AT
//    ONCE: the open shard stays open, so the big shard comes before it in the numbering.
// 3. Otherwise, if the open shard plus this tensor would exceed the limit, the open shard is
//    closed (appended) and a new one opened. Then the tensor joins the open shard.
// 4. At the end the open shard is appended if it is not empty; then every alias joins the shard
//    of the first tensor of its storage, after that shard's own tensors (aliases grouped by
//    storage, storages in order of first appearance).
// No bin-packing: a 10 GB limit on [6, 6, 2, 6, 2, 2] GB gives [6], [6, 2], [6, 2, 2].
//
// `total_size` is the sum of the bytes of unique storages (aliases counted once).
// File names: with several shards `<stem>-00001-of-0000N<ext>` (1-based, %05d, wider only past
// 99999); with one shard the plain name and no index file; with no tensor at all no file.
//   safetensors: model.safetensors, model-00001-of-00002.safetensors, model.safetensors.index.json
//   torch .bin:  pytorch_model.bin, pytorch_model-00001-of-00002.bin, pytorch_model.bin.index.json
//   HDF5 (our own convention, no upstream one exists): model.h5, model-00001-of-00002.h5,
//   model.h5.index.json
// Without a limit (std::nullopt, "--max_shard_size none") everything goes to one file.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "output/output_layout.hpp"

namespace z2f::output {

struct ShardInput {
    std::string_view name;
    std::uint64_t bytes = 0;  // output bytes of the tensor; ignored for aliases
    // Index (in the same input span) of the first tensor sharing this one's storage, or -1 when
    // this tensor is the first (or only) user of its storage. Must point backwards, to a tensor
    // whose own storage_of is -1.
    std::int64_t storage_of = -1;
};

struct ShardFile {
    std::string name;
    // Input indices in huggingface_hub's order for this file: the shard's own tensors in the
    // order they were added, then its aliases. With a single file: every input, in input order.
    std::vector<std::uint32_t> tensors;
    std::uint64_t bytes = 0;  // unique-storage bytes in this file
};

struct ShardSplit {
    std::vector<ShardFile> files;
    std::vector<std::uint32_t> file_of;  // per input index: index into `files`
    std::uint64_t total_size = 0;

    // Only a sharded output gets an index file.
    bool is_sharded() const noexcept { return files.size() > 1; }
};

ShardSplit split_into_shards(std::span<const ShardInput> tensors,
                             std::optional<std::uint64_t> max_shard_size, OutputFormat format);

// "model.safetensors", "pytorch_model.bin", "model.h5".
std::string_view single_file_name(OutputFormat format) noexcept;
// The name of shard `index` (0-based) of `count` shards, count >= 2.
std::string shard_file_name(OutputFormat format, std::size_t index, std::size_t count);
// "model.safetensors.index.json", "pytorch_model.bin.index.json", "model.h5.index.json".
std::string_view index_file_name(OutputFormat format) noexcept;

}  // namespace z2f::output
