// What a conversion is asked to do, owned by the library and used by the command line as is.
// Each choice is one enum with one name table (`enum_names<E>()`); the command line parses
// and prints through those tables, the run summary names values with them.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "zero2fp32/dtype.hpp"

namespace z2f {

// kUniversal: DeepSpeed's universal checkpoint (docs/universal-checkpoint.md), every trainable
// parameter's fp32 master and Adam moments in files of their own, to resume training at another
// scale; the other three are Hugging Face formats.
enum class OutputFormat : std::uint8_t { kSafetensors, kTorch, kHdf5, kUniversal };
// How the output is written by the one copy engine (docs/io-engine.md): in aligned blocks,
// several in flight, with O_DIRECT (kDirect: the page cache keeps none of it; buffered anyway
// where the file system refuses O_DIRECT) or through the page cache (kBuffered).
enum class IoBackend : std::uint8_t { kDirect, kBuffered };
// How the inputs are read: buffered (a copy from the page cache, the fastest when the
// checkpoint is cached), O_DIRECT (when it is not: reads the device without filling the
// cache), or kAuto, which samples the cache (mincore) and picks per rank.
enum class ReadMode : std::uint8_t { kAuto, kBuffered, kDirect };
// ZeRO-1 frozen parameters exist only in the model file: emit them from there, or skip them as
// zero_to_fp32 does.
enum class Stage1Frozen : std::uint8_t { kEmit, kSkip };
// How bf16 tensors are stored in HDF5: uint16 with attribute dtype="bfloat16" (h5py reads it)
// or a custom 16-bit float type.
enum class Hdf5Bf16 : std::uint8_t { kUint16, kFloat };
// The options that shape the output bytes: what a run records in OUT_DIR, and what --verify
// takes from that record.
enum class ShapeOption : std::uint8_t {
    kFormat,
    kDtype,
    kMaxShardSize,
    kCastAllBuffers,
    kKeepFrozenDtype,
    kStage1Frozen,
    kExcludeFrozen,
    kUntie,
    kInclude,
    kExclude,
    kStripPrefix,
    kHdf5Bf16,
    kTpRules,
    kTpReplicated,
    kStripVocabPadding,
};

// Tensor-parallel replicated parameters, and tied pipeline weights: check that every copy is
// bit-equal (a mismatch is an error naming the parameter and its largest difference), take TP
// rank 0's, or write their mean (docs/parallel-checkpoints.md §3.1).
enum class TpReplicated : std::uint8_t { kCheck, kFirst, kAverage };

struct Options {
    std::string tag;  // empty: read CKPT_DIR/latest (or CKPT_DIR is the tag folder)
    // Follow CKPT_DIR/latest_universal even when CKPT_DIR/latest exists (a folder holding both a
    // checkpoint and its universal conversion); `tag` "<tag>_universal" does the same.
    bool from_universal = false;

    OutputFormat format = OutputFormat::kSafetensors;
    // Hugging Face formats only. Universal output is float32 and one file per tensor by
    // definition: another dtype, and the tensor-selecting options below, are usage errors with
    // it; max_shard_size is not used.
    DType dtype = DType::kF32;  // of every floating tensor: kF32, kBF16 or kF16
    std::optional<std::uint64_t> max_shard_size = std::uint64_t{5'000'000'000};  // none: one file

    // zero_to_fp32 compatibility (--parity = the first two and Stage1Frozen::kSkip).
    bool cast_all_buffers = false;
    bool keep_frozen_dtype = false;
    Stage1Frozen stage1_frozen = Stage1Frozen::kEmit;
    bool exclude_frozen = false;

    bool untie = false;
    std::vector<std::string> include;  // ECMAScript regexes searched in the names
    std::vector<std::string> exclude;
    std::vector<std::string> strip_prefixes;
    bool copy_hf_files = true;  // universal output never copies them (not part of the format)
    Hdf5Bf16 hdf5_bf16 = Hdf5Bf16::kUint16;

    // Tensor-, pipeline- and expert-parallel checkpoints (docs/parallel-checkpoints.md).
    // A JSON file of TP merge rules (§3.3), replacing the checkpoint's own; empty: the
    // checkpoint's universal_checkpoint_info.
    std::string tp_rules;
    TpReplicated tp_replicated = TpReplicated::kCheck;
    // Keep only the original_vocab_size real rows of a padded vocabulary (default: as trained).
    bool strip_vocab_padding = false;

    IoBackend io = IoBackend::kDirect;
    ReadMode read_mode = ReadMode::kAuto;
    std::uint64_t buffer_size = std::uint64_t{32} << 20;  // per rank; bounds its memory
    // The direct-I/O block: the unit of every write, and where files shared by
    // several ranks are cut (plan/ownership.hpp), so an input of the plan. A multiple of 4096.
    std::uint64_t block_size = std::uint64_t{4} << 20;
    // Check every input record read from against the CRC-32 of its zip directory entry.
    bool input_crc = true;

    bool overwrite = false;
    bool resume = false;
    bool dry_run = false;
    // Only reads: compares the outputs OUT_DIR holds with the checkpoint, file by file, and
    // never creates, renames or removes anything.
    bool verify = false;
    bool space_check = true;
    // With verify: the output-shaping options the caller chose on purpose. The others are
    // taken from the run record in OUT_DIR, never from the defaults above; a chosen one that
    // the record contradicts is a usage error.
    std::vector<ShapeOption> chosen;
};

// The name table of an option enum: {value, name} in declaration order.
template <typename Enum>
struct EnumNames;

template <>
struct EnumNames<OutputFormat> {
    static constexpr std::array<std::pair<OutputFormat, std::string_view>, 4> kTable{{
        {OutputFormat::kSafetensors, "safetensors"},
        {OutputFormat::kTorch, "torch"},
        {OutputFormat::kHdf5, "hdf5"},
        {OutputFormat::kUniversal, "universal"},
    }};
};
template <>
struct EnumNames<IoBackend> {
    static constexpr std::array<std::pair<IoBackend, std::string_view>, 2> kTable{{
        {IoBackend::kDirect, "direct"},
        {IoBackend::kBuffered, "buffered"},
    }};
};
template <>
struct EnumNames<ReadMode> {
    static constexpr std::array<std::pair<ReadMode, std::string_view>, 3> kTable{{
        {ReadMode::kAuto, "auto"},
        {ReadMode::kBuffered, "buffered"},
        {ReadMode::kDirect, "direct"},
    }};
};
template <>
struct EnumNames<Stage1Frozen> {
    static constexpr std::array<std::pair<Stage1Frozen, std::string_view>, 2> kTable{{
        {Stage1Frozen::kEmit, "emit"},
        {Stage1Frozen::kSkip, "skip"},
    }};
};
template <>
struct EnumNames<Hdf5Bf16> {
    static constexpr std::array<std::pair<Hdf5Bf16, std::string_view>, 2> kTable{{
        {Hdf5Bf16::kUint16, "uint16"},
        {Hdf5Bf16::kFloat, "float"},
    }};
};
// The command-line names of the output-shaping options, for messages.
template <>
struct EnumNames<ShapeOption> {
    static constexpr std::array<std::pair<ShapeOption, std::string_view>, 15> kTable{{
        {ShapeOption::kFormat, "--format"},
        {ShapeOption::kDtype, "--dtype"},
        {ShapeOption::kMaxShardSize, "--max-shard-size"},
        {ShapeOption::kCastAllBuffers, "--cast-all-buffers"},
        {ShapeOption::kKeepFrozenDtype, "--keep-frozen-dtype"},
        {ShapeOption::kStage1Frozen, "--stage1-frozen"},
        {ShapeOption::kExcludeFrozen, "--exclude_frozen_parameters"},
        {ShapeOption::kUntie, "--untie"},
        {ShapeOption::kInclude, "--include"},
        {ShapeOption::kExclude, "--exclude"},
        {ShapeOption::kStripPrefix, "--strip-prefix"},
        {ShapeOption::kHdf5Bf16, "--hdf5-bf16"},
        {ShapeOption::kTpRules, "--tp-rules"},
        {ShapeOption::kTpReplicated, "--tp-replicated"},
        {ShapeOption::kStripVocabPadding, "--strip-vocab-padding"},
    }};
};
template <>
struct EnumNames<TpReplicated> {
    static constexpr std::array<std::pair<TpReplicated, std::string_view>, 3> kTable{{
        {TpReplicated::kCheck, "check"},
        {TpReplicated::kFirst, "first"},
        {TpReplicated::kAverage, "average"},
    }};
};
// The output dtypes --dtype offers, by their option names.
template <>
struct EnumNames<DType> {
    static constexpr std::array<std::pair<DType, std::string_view>, 3> kTable{{
        {DType::kF32, "fp32"},
        {DType::kBF16, "bf16"},
        {DType::kF16, "fp16"},
    }};
};

template <typename Enum>
constexpr std::string_view enum_name(Enum value) noexcept {
    for (const auto& [entry, name] : EnumNames<Enum>::kTable) {
        if (entry == value)
            return name;
    }
    return "?";
}

template <typename Enum>
constexpr std::optional<Enum> enum_from_name(std::string_view name) noexcept {
    for (const auto& [entry, entry_name] : EnumNames<Enum>::kTable) {
        if (entry_name == name)
            return entry;
    }
    return std::nullopt;
}

// "a, b or c": the names of an enum, for messages and help.
template <typename Enum>
std::string enum_choices() {
    std::string text;
    const auto& table = EnumNames<Enum>::kTable;
    for (std::size_t i = 0; i < table.size(); ++i) {
        text += (i == 0 ? "" : i + 1 == table.size() ? " or " : ", ");
        text += table[i].second;
    }
    return text;
}

}  // namespace z2f
