#include "output/shard_split.hpp"

#include <algorithm>
#include <cstdio>
#include <limits>

#include "common/errors.hpp"

namespace z2f::output {
namespace {

struct NameParts {
    std::string_view stem;
    std::string_view extension;
};

NameParts name_parts(OutputFormat format) noexcept {
    switch (format) {
        case OutputFormat::kSafetensors:
            return {"model", ".safetensors"};
        case OutputFormat::kTorch:
            return {"pytorch_model", ".bin"};
        case OutputFormat::kHdf5:
            return {"model", ".h5"};
        case OutputFormat::kUniversal:
            break;  // not sharded: its files are named by universal_layout
    }
    return {"model", ".safetensors"};
}

void check_inputs(std::span<const ShardInput> tensors) {
    if (tensors.size() > std::numeric_limits<std::uint32_t>::max()) {
        throw_internal_error("shard split: too many tensors");
    }
    for (std::size_t i = 0; i < tensors.size(); ++i) {
        const std::int64_t owner = tensors[i].storage_of;
        if (owner < -1 || owner >= static_cast<std::int64_t>(i) ||
            (owner >= 0 && tensors[static_cast<std::size_t>(owner)].storage_of != -1)) {
            throw_internal_error("shard split: tensor '" + std::string(tensors[i].name) +
                                 "' names an invalid first tensor of its storage");
        }
    }
}

std::uint64_t checked_add(std::uint64_t a, std::uint64_t b) {
    if (b > std::numeric_limits<std::uint64_t>::max() - a) {
        throw_internal_error("shard split: total size overflows 64 bits");
    }
    return a + b;
}

}  // namespace

std::string_view single_file_name(OutputFormat format) noexcept {
    switch (format) {
        case OutputFormat::kSafetensors:
            return "model.safetensors";
        case OutputFormat::kTorch:
            return "pytorch_model.bin";
        case OutputFormat::kHdf5:
            return "model.h5";
        case OutputFormat::kUniversal:
            break;
    }
    return "model.safetensors";
}

std::string_view index_file_name(OutputFormat format) noexcept {
    switch (format) {
        case OutputFormat::kSafetensors:
            return "model.safetensors.index.json";
        case OutputFormat::kTorch:
            return "pytorch_model.bin.index.json";
        case OutputFormat::kHdf5:
            return "model.h5.index.json";
        case OutputFormat::kUniversal:
            break;
    }
    return "model.safetensors.index.json";
}

std::string shard_file_name(OutputFormat format, std::size_t index, std::size_t count) {
    // Python's f"-{idx+1:05d}-of-{nb_shards:05d}": zero-padded to at least five digits.
    char suffix[64];
    std::snprintf(suffix, sizeof suffix, "-%05zu-of-%05zu", index + 1, count);
    const NameParts parts = name_parts(format);
    std::string name(parts.stem);
    name += suffix;
    name += parts.extension;
    return name;
}

ShardSplit split_into_shards(std::span<const ShardInput> tensors,
                             std::optional<std::uint64_t> max_shard_size, OutputFormat format) {
    check_inputs(tensors);
    const std::uint64_t limit = max_shard_size.value_or(std::numeric_limits<std::uint64_t>::max());

    ShardSplit split;
    std::vector<ShardFile>& shards = split.files;
    split.file_of.assign(tensors.size(), 0);
    ShardFile current;
    std::vector<std::uint32_t> aliases;  // in input order

    for (std::size_t i = 0; i < tensors.size(); ++i) {
        const auto index = static_cast<std::uint32_t>(i);
        if (tensors[i].storage_of >= 0) {
            aliases.push_back(index);
            continue;
        }
        const std::uint64_t size = tensors[i].bytes;
        split.total_size = checked_add(split.total_size, size);
        if (size > limit) {
            // Its own shard, appended now, ahead of the still-open one.
            shards.push_back(ShardFile{{}, {index}, size});
            continue;
        }
        if (size > limit - current.bytes) {  // current.bytes <= limit always holds
            shards.push_back(std::move(current));
            current = ShardFile{};
        }
        current.tensors.push_back(index);
        current.bytes += size;
    }
    if (!current.tensors.empty()) {
        shards.push_back(std::move(current));
    }
    // Shard positions are final only now (oversized shards jump ahead of the open one).
    for (std::size_t s = 0; s < shards.size(); ++s) {
        for (std::uint32_t t : shards[s].tensors) {
            split.file_of[t] = static_cast<std::uint32_t>(s);
        }
    }

    // Aliases join the shard of their storage's first tensor, grouped by storage in order of
    // the storage's first appearance (huggingface_hub walks its storage_id -> [keys] dict), which
    // is the order of the first tensors' indices; within a storage, in input order.
    std::stable_sort(aliases.begin(), aliases.end(), [&](std::uint32_t a, std::uint32_t b) {
        return tensors[a].storage_of < tensors[b].storage_of;
    });
    const std::size_t shard_count = shards.size();
    for (std::uint32_t alias : aliases) {
        const std::uint32_t file =
            split.file_of[static_cast<std::size_t>(tensors[alias].storage_of)];
        split.file_of[alias] = file;
        if (shard_count > 1) {
            shards[file].tensors.push_back(alias);
        }
    }

    if (shard_count == 1) {
        // One file: huggingface_hub lists every key in state-dict order, aliases in place.
        ShardFile& only = shards.front();
        only.name = std::string(single_file_name(format));
        only.tensors.resize(tensors.size());
        for (std::size_t i = 0; i < tensors.size(); ++i) {
            only.tensors[i] = static_cast<std::uint32_t>(i);
        }
    } else {
        for (std::size_t s = 0; s < shard_count; ++s) {
            shards[s].name = shard_file_name(format, s, shard_count);
        }
    }
    return split;
}

}  // namespace z2f::output
