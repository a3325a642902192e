#include "cli/command_line.hpp"

#include <array>
#include <charconv>
#include <sstream>

#include <boost/program_options.hpp>

#include "common/byte_size.hpp"
#include "common/errors.hpp"
#include "output/shard_size.hpp"

namespace po = boost::program_options;

namespace z2f::cli {
namespace {

constexpr const char* kUsage = "Usage: zero2fp32-mpi CKPT_DIR OUT_DIR [options]";

constexpr const char* kExamples = R"(
Examples:
  srun -n 64 zero2fp32-mpi /ckpt/checkpoint-500 /out/model          # sharded safetensors, fp32
  mpirun -n 8 zero2fp32-mpi ckpt out --dtype bf16 --max-shard-size 10GB
  zero2fp32-mpi ckpt out --format torch                              # pytorch_model*.bin
  zero2fp32-mpi ckpt out --parity --max_shard_size 5GB               # exactly zero_to_fp32's tensors
  zero2fp32-mpi ckpt out --dry-run                                   # show the plan, write nothing
  srun -n 64 zero2fp32-mpi ckpt out --resume                         # finish an interrupted run
  srun -n 64 zero2fp32-mpi ckpt out --verify                         # check out against ckpt
  srun -n 64 zero2fp32-mpi ckpt ckpt --format universal              # universal checkpoint in ckpt
  zero2fp32-mpi ckpt out --from-universal                            # HF weights of latest_universal

CKPT_DIR is the folder holding `latest` (or give -t TAG), or a tag folder itself; a universal
checkpoint (latest_universal, -t TAG_universal) converts like any other.
The default output is safetensors; consumers of pytorch_model.bin add --format torch.
--format universal writes OUT_DIR/TAG_universal/ and OUT_DIR/latest_universal; OUT_DIR may be
the folder holding `latest` (nothing else there is touched). Resume training from it with
"checkpoint": {"load_universal": true} in the DeepSpeed config.

Exit codes: 0 success, 1 conversion error (bad checkpoint, I/O error, verification mismatch),
2 usage error, 3 interrupted (SIGTERM/SIGINT).
)";

// The value of `--option` through the enum's one name table (zero2fp32/options.hpp).
template <typename Enum>
Enum choose(const std::string& option, const std::string& value) {
    if (std::optional<Enum> choice = enum_from_name<Enum>(value))
        return *choice;
    throw_usage_error("--" + option + " must be " + enum_choices<Enum>() + " (got '" + value +
                      "')");
}

// The spellings PyTorch and Hugging Face users type for a format or a dtype, as this tool's
// names; any other text is returned as it is.
std::string without_alias(const std::string& option, const std::string& value) {
    static constexpr std::array<std::array<const char*, 3>, 7> kAliases = {{
        {"format", "bin", "torch"},
        {"format", "pt", "torch"},
        {"format", "pytorch", "torch"},
        {"format", "st", "safetensors"},
        {"dtype", "float32", "fp32"},
        {"dtype", "bfloat16", "bf16"},
        {"dtype", "float16", "fp16"},
    }};
    for (const auto& [name, alias, canonical] : kAliases) {
        if (option == name && value == alias)
            return canonical;
    }
    return value;
}

}  // namespace

std::uint64_t parse_buffer_size(const std::string& text) {
    std::uint64_t bytes = parse_byte_size(text, "--buffer-size");
    if (bytes < (64ULL << 10) || bytes > (16ULL << 30)) {
        throw_usage_error("--buffer-size must be between 64KiB and 16GiB (got '" + text + "')");
    }
    return bytes;
}

std::uint64_t parse_block_size(const std::string& text) {
    std::uint64_t bytes = parse_byte_size(text, "--block-size");
    if (bytes < 4096 || bytes > (1ULL << 30) || bytes % 4096 != 0) {
        throw_usage_error("--block-size must be a multiple of 4KiB between 4KiB and 1GiB (got '" +
                          text + "')");
    }
    return bytes;
}

std::string find_summary_path(int argc, const char* const* argv) noexcept {
    // By hand rather than through program_options: the rest of the line may be what failed to
    // parse (an unknown option, "--tag=").
    const std::string_view option = "--summary-json";
    std::string path;
    for (int i = 1; i < argc; ++i) {
        std::string_view arg = argv[i];
        if (arg == option && i + 1 < argc)
            path = argv[++i];
        else if (arg.starts_with(option) && arg.size() > option.size() && arg[option.size()] == '=')
            path = std::string(arg.substr(option.size() + 1));
    }
    return path;
}

CommandLine parse_command_line(int argc, const char* const* argv) {
    po::options_description zero_to_fp32(
        "Arguments of DeepSpeed's zero_to_fp32.py (accepted unchanged)");
    zero_to_fp32.add_options()("max_shard_size", po::value<std::string>(),
                               "same as --max-shard-size")(
        "safe_serialization", po::bool_switch(), "same as --format safetensors (the default here)")(
        "tag,t", po::value<std::string>(),
        "checkpoint tag (folder) to convert; default: the one in `latest`")(
        "exclude_frozen_parameters", po::bool_switch(),
        "leave out frozen (requires_grad=False) parameters")("debug,d", po::bool_switch(),
                                                             "print every tensor of the plan");

    po::options_description output("Output");
    output.add_options()("format", po::value<std::string>(),
                         "safetensors (default; also st), torch (pytorch_model*.bin; also bin, "
                         "pt, pytorch), hdf5 (model*.h5) or universal (DeepSpeed's universal "
                         "checkpoint: fp32 masters and Adam moments per parameter, to resume "
                         "training at another scale)")(
        "from-universal", po::bool_switch(),
        "convert CKPT_DIR/latest_universal even where CKPT_DIR/latest exists")(
        "dtype", po::value<std::string>(),
        "fp32 (default), bf16 or fp16 (also float32, bfloat16, float16): dtype of every "
        "floating tensor")(
        "max-shard-size", po::value<std::string>(),
        "Hugging Face shard size: 5GB (default), 500MB, 1.5TB, 4GiB, ...: kB, MB, GB, TB "
        "(powers of 1000, as huggingface_hub) or KiB, MiB, GiB, TiB (powers of 1024); none "
        "for one file")("parity", po::bool_switch(),
                        "tensors, dtypes and order exactly as zero_to_fp32.py writes them "
                        "(= --cast-all-buffers --keep-frozen-dtype --stage1-frozen skip)")(
        "cast-all-buffers", po::bool_switch(),
        "cast every buffer to fp32, integer ones too (zero_to_fp32)")(
        "keep-frozen-dtype", po::bool_switch(),
        "keep frozen parameters in their stored 16-bit dtype (zero_to_fp32)")(
        "stage1-frozen", po::value<std::string>(),
        "emit (default) or skip: ZeRO-1 frozen parameters, which "
        "only the model file holds")("untie", po::bool_switch(),
                                     "write tied parameters' bytes again under every name")(
        "include", po::value<std::vector<std::string>>()->composing(),
        "keep only tensors whose name matches "
        "this regex (repeatable)")("exclude", po::value<std::vector<std::string>>()->composing(),
                                   "drop tensors whose name matches this "
                                   "regex (repeatable)")(
        "strip-prefix", po::value<std::vector<std::string>>()->composing(),
        "remove this leading prefix from "
        "names, e.g. _orig_mod. (repeatable)")(
        "no-copy-hf-files", po::bool_switch(),
        "do not copy config.json, tokenizer files, ... to OUT_DIR")(
        "hdf5-bf16", po::value<std::string>(),
        "uint16 (default: uint16 + attribute dtype=bfloat16) or float "
        "(a custom 16-bit float type)");

    po::options_description parallel(
        "Tensor-, pipeline- and expert-parallel checkpoints (docs/parallel-checkpoints.md)");
    parallel.add_options()("tp-rules", po::value<std::string>(),
                           "JSON file of TP merge rules (regex -> rule), for checkpoints "
                           "that carry none, or to override theirs")(
        "tp-replicated", po::value<std::string>(),
        "TP-replicated parameters: check (default; every copy must be bit-equal), first "
        "(TP rank 0's copy) or average")("strip-vocab-padding", po::bool_switch(),
                                         "keep only the original_vocab_size rows of a padded "
                                         "vocabulary (default: as trained)");

    po::options_description run("Run");
    run.add_options()("io", po::value<std::string>(),
                      "how the output is written, in aligned blocks, several in flight: direct "
                      "(default: O_DIRECT, nothing left in the page cache) or buffered (through "
                      "the page cache)")(
        "read-mode", po::value<std::string>(),
        "how the checkpoint is read: auto (default: buffered when it is in the page cache, "
        "O_DIRECT when not), buffered or direct")(
        "buffer-size", po::value<std::string>(),
        "I/O buffer per rank (default 32MiB; same units as --max-shard-size); bounds memory "
        "use")("block-size", po::value<std::string>(),
               "direct-I/O block (default 4MiB, a multiple of 4KiB): the unit of --io direct's "
               "writes and where files shared by several ranks are cut; on Lustre or GPFS a "
               "multiple of the stripe or block size")("overwrite", po::bool_switch(),
                                                       "replace existing output files")(
        "resume", po::bool_switch(),
        "keep the complete files of an interrupted run, write the rest")(
        "dry-run", po::bool_switch(),
        "print the plan (files, sizes, owner ranks, bytes to read); write nothing")(
        "verify", po::bool_switch(),
        "only check: compare every output file in OUT_DIR with the checkpoint, as its run "
        "record says it was written; never writes")(
        "no-space-check", po::bool_switch(), "do not refuse to start when OUT_DIR looks too small")(
        "no-input-crc", po::bool_switch(),
        "do not check the input records read against their zip CRC-32s (checked by default)")(
        "summary-json", po::value<std::string>(),
        "write the run summary (or the error) as JSON to this file")(
        "progress", po::value<std::string>(), "auto (default), always or never")(
        "quiet,q", po::bool_switch(), "print errors only")(
        "verbose,v", po::bool_switch(), "print notes about the checkpoint and the plan")(
        "version", "print the version")("help,h", "print this help");

    po::options_description hidden;
    hidden.add_options()("checkpoint_dir", po::value<std::string>())(
        "output_dir", po::value<std::string>())("extra", po::value<std::vector<std::string>>());
    po::positional_options_description positional;
    positional.add("checkpoint_dir", 1).add("output_dir", 1).add("extra", -1);

    po::options_description all;
    all.add(output).add(parallel).add(run).add(zero_to_fp32).add(hidden);
    po::variables_map vm;
    try {
        po::store(po::command_line_parser(argc, argv).options(all).positional(positional).run(),
                  vm);
        po::notify(vm);
    } catch (const po::error& error) {
        throw_usage_error(error.what());
    }

    if (vm.count("help") != 0) {
        std::ostringstream text;
        po::options_description visible;
        visible.add(output).add(parallel).add(run).add(zero_to_fp32);
        text << kUsage
             << "\n\nConsolidates a DeepSpeed ZeRO (stage 1-3) checkpoint, or a tensor-, "
                "pipeline- or expert-parallel one,\ninto full tensors, in parallel over MPI "
                "ranks.\n\n"
             << visible << kExamples;
        return HelpRequest{text.str()};
    }
    if (vm.count("version") != 0) {
        return VersionRequest{};
    }
    if (vm.count("extra") != 0) {
        throw_usage_error("unexpected argument '" +
                          vm["extra"].as<std::vector<std::string>>().front() +
                          "' (only CKPT_DIR and OUT_DIR are positional)");
    }
    if (vm.count("checkpoint_dir") == 0 || vm.count("output_dir") == 0) {
        throw_usage_error("CKPT_DIR and OUT_DIR are required");
    }

    ConvertRequest request;
    request.checkpoint_dir = vm["checkpoint_dir"].as<std::string>();
    request.output_dir = vm["output_dir"].as<std::string>();
    // An empty argument is a shell variable that was never set: never "the current folder".
    if (request.checkpoint_dir.empty())
        throw_usage_error("CKPT_DIR is empty");
    if (request.output_dir.empty())
        throw_usage_error("OUT_DIR is empty");
    while (request.output_dir.size() > 1 && request.output_dir.back() == '/')
        request.output_dir.pop_back();
    Options& options = request.options;
    if (vm.count("tag") != 0) {
        options.tag = vm["tag"].as<std::string>();
        if (options.tag.empty())
            throw_usage_error("-t/--tag is empty (leave it out to read the tag from 'latest')");
    }
    options.from_universal = vm["from-universal"].as<bool>();
    std::vector<ShapeOption>& chosen = options.chosen;

    bool safe_serialization = vm["safe_serialization"].as<bool>();
    if (vm.count("format") != 0) {
        options.format =
            choose<OutputFormat>("format", without_alias("format", vm["format"].as<std::string>()));
        chosen.push_back(ShapeOption::kFormat);
        if (safe_serialization && options.format != OutputFormat::kSafetensors) {
            throw_usage_error("--safe_serialization asks for safetensors but --format asks for " +
                              vm["format"].as<std::string>());
        }
    }
    if (vm.count("dtype") != 0) {
        options.dtype =
            choose<DType>("dtype", without_alias("dtype", vm["dtype"].as<std::string>()));
        chosen.push_back(ShapeOption::kDtype);
    }
    if (vm.count("max_shard_size") != 0 && vm.count("max-shard-size") != 0) {
        throw_usage_error("give --max-shard-size or --max_shard_size, not both");
    }
    for (const char* name : {"max-shard-size", "max_shard_size"}) {
        if (vm.count(name) == 0)
            continue;
        if (options.format == OutputFormat::kUniversal) {
            throw_usage_error(std::string("--") + name +
                              " does not apply to --format universal (one file per tensor)");
        }
        options.max_shard_size =
            output::parse_max_shard_size(vm[name].as<std::string>(), std::string("--") + name);
        chosen.push_back(ShapeOption::kMaxShardSize);
    }

    bool parity = vm["parity"].as<bool>();
    options.cast_all_buffers = parity || vm["cast-all-buffers"].as<bool>();
    options.keep_frozen_dtype = parity || vm["keep-frozen-dtype"].as<bool>();
    if (parity)
        options.stage1_frozen = Stage1Frozen::kSkip;
    if (vm.count("stage1-frozen") != 0) {
        options.stage1_frozen =
            choose<Stage1Frozen>("stage1-frozen", vm["stage1-frozen"].as<std::string>());
    }
    if (parity || vm["cast-all-buffers"].as<bool>())
        chosen.push_back(ShapeOption::kCastAllBuffers);
    if (parity || vm["keep-frozen-dtype"].as<bool>())
        chosen.push_back(ShapeOption::kKeepFrozenDtype);
    if (parity || vm.count("stage1-frozen") != 0)
        chosen.push_back(ShapeOption::kStage1Frozen);
    if (parity && options.dtype != DType::kF32) {
        throw_usage_error(
            "--parity reproduces zero_to_fp32's fp32 output; it cannot be combined with --dtype " +
            vm["dtype"].as<std::string>());
    }
    options.exclude_frozen = vm["exclude_frozen_parameters"].as<bool>();
    if (options.exclude_frozen)
        chosen.push_back(ShapeOption::kExcludeFrozen);
    options.untie = vm["untie"].as<bool>();
    if (options.untie)
        chosen.push_back(ShapeOption::kUntie);
    if (vm.count("include") != 0) {
        options.include = vm["include"].as<std::vector<std::string>>();
        chosen.push_back(ShapeOption::kInclude);
    }
    if (vm.count("exclude") != 0) {
        options.exclude = vm["exclude"].as<std::vector<std::string>>();
        chosen.push_back(ShapeOption::kExclude);
    }
    if (vm.count("strip-prefix") != 0) {
        options.strip_prefixes = vm["strip-prefix"].as<std::vector<std::string>>();
        chosen.push_back(ShapeOption::kStripPrefix);
    }
    options.copy_hf_files = !vm["no-copy-hf-files"].as<bool>();
    if (vm.count("hdf5-bf16") != 0) {
        if (options.format != OutputFormat::kHdf5) {
            throw_usage_error("--hdf5-bf16 applies to --format hdf5 only");
        }
        options.hdf5_bf16 = choose<Hdf5Bf16>("hdf5-bf16", vm["hdf5-bf16"].as<std::string>());
        chosen.push_back(ShapeOption::kHdf5Bf16);
    }

    if (vm.count("tp-rules") != 0) {
        options.tp_rules = vm["tp-rules"].as<std::string>();
        if (options.tp_rules.empty())
            throw_usage_error("--tp-rules needs a file name");
        chosen.push_back(ShapeOption::kTpRules);
    }
    if (vm.count("tp-replicated") != 0) {
        options.tp_replicated =
            choose<TpReplicated>("tp-replicated", vm["tp-replicated"].as<std::string>());
        chosen.push_back(ShapeOption::kTpReplicated);
    }
    options.strip_vocab_padding = vm["strip-vocab-padding"].as<bool>();
    if (options.strip_vocab_padding)
        chosen.push_back(ShapeOption::kStripVocabPadding);

    if (vm.count("io") != 0) {
        const std::string io = vm["io"].as<std::string>();
        if (io == "pread" || io == "mmap" || io == "copy_file_range") {
            throw_usage_error("--io " + io +
                              " is gone: one engine writes every output (--io direct, the "
                              "default, or --io buffered to write through the page cache)");
        }
        options.io = choose<IoBackend>("io", io);
    }
    if (vm.count("read-mode") != 0)
        options.read_mode = choose<ReadMode>("read-mode", vm["read-mode"].as<std::string>());
    if (vm.count("buffer-size") != 0)
        options.buffer_size = parse_buffer_size(vm["buffer-size"].as<std::string>());
    if (vm.count("block-size") != 0)
        options.block_size = parse_block_size(vm["block-size"].as<std::string>());
    options.overwrite = vm["overwrite"].as<bool>();
    options.resume = vm["resume"].as<bool>();
    options.dry_run = vm["dry-run"].as<bool>();
    options.verify = vm["verify"].as<bool>();
    options.space_check = !vm["no-space-check"].as<bool>();
    options.input_crc = !vm["no-input-crc"].as<bool>();
    if (vm.count("summary-json") != 0)
        request.summary_json = vm["summary-json"].as<std::string>();
    if (vm.count("progress") != 0)
        request.progress = choose<ProgressMode>("progress", vm["progress"].as<std::string>());
    bool quiet = vm["quiet"].as<bool>();
    bool verbose = vm["verbose"].as<bool>();
    bool debug = vm["debug"].as<bool>();
    if (quiet && (verbose || debug)) {
        throw_usage_error("-q and -v/-d contradict each other");
    }
    request.verbosity = quiet ? -1 : debug ? 2 : verbose ? 1 : 0;
    return request;
}

}  // namespace z2f::cli
