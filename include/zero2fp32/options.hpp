// Everything a conversion can be asked to do: the command line of zero2fp32-mpi, as a struct.
// Names follow the command-line options (see `zero2fp32-mpi --help` and README.md, "Options").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace z2f {

enum class FormatOption { kSafetensors, kTorch, kHdf5 };
enum class DTypeOption { kFp32, kBf16, kFp16 };
enum class IoOption { kMmap, kPread, kCopyFileRange };
enum class Stage1FrozenOption { kEmit, kSkip };
enum class ProgressOption { kAuto, kAlways, kNever };

struct ConvertOptions {
    std::string checkpoint_dir;
    std::string output_dir;
    std::string tag;  // empty: read `latest`

    FormatOption format = FormatOption::kSafetensors;
    DTypeOption dtype = DTypeOption::kFp32;
    std::optional<std::uint64_t> max_shard_size = std::uint64_t{5'000'000'000};  // nullopt: none

    // zero_to_fp32 compatibility switches (--parity sets the first two and stage1 skip).
    bool cast_all_buffers = false;
    bool keep_frozen_dtype = false;
    Stage1FrozenOption stage1_frozen = Stage1FrozenOption::kEmit;
    bool exclude_frozen = false;

    bool untie = false;
    std::vector<std::string> include;
    std::vector<std::string> exclude;
    std::vector<std::string> strip_prefixes;
    bool copy_hf_files = true;
    bool hdf5_bf16_float = false;

    IoOption io = IoOption::kPread;
    std::uint64_t buffer_size = std::uint64_t{16} << 20;

    bool overwrite = false;
    bool resume = false;
    bool dry_run = false;
    bool verify = false;
    bool space_check = true;
    std::string summary_json;  // empty: none

    ProgressOption progress = ProgressOption::kAuto;
    int verbosity = 0;  // -1 quiet, 0 normal, 1 verbose (-v), 2 debug (-d)
};

}  // namespace z2f
