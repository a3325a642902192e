// zero2fp32-synth: writes a synthetic DeepSpeed ZeRO-2 or ZeRO-3 checkpoint of a Llama-shaped
// model, file for file in DeepSpeed's layout, with values that are a pure function of
// (seed, tensor name, element) — see synth/value_function.hpp — so that any consolidation of it
// can be checked exactly. Under mpirun/srun with P processes, process p writes files p, p+P,
// ...; process 0 writes `latest` once every file is complete. docs/synth.md has examples.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>

#include <boost/program_options.hpp>
#include <mpi.h>

#include "cli/exit_code.hpp"
#include "common/errors.hpp"
#include "io/posix_file.hpp"
#include "mpi/mpi_start.hpp"
#include "synth/checkpoint_writer.hpp"
#include "synth/synth_options.hpp"
#include "zero2fp32/version.hpp"

namespace po = boost::program_options;
using z2f::synth::SynthOptions;

namespace {

struct Request {
    enum class Kind { kRun, kHelp, kVersion } kind = Kind::kRun;
    std::string help;
    SynthOptions options;
    std::string out_dir;
    bool quiet = false;
};

// "2e9", "1000000000", "1.5e9": a positive count written as a number.
double parse_number(const std::string& text, const char* option) {
    std::size_t used = 0;
    double value = 0;
    try {
        value = std::stod(text, &used);
    } catch (const std::exception&) {
        used = 0;
    }
    if (used != text.size() || !std::isfinite(value) || value <= 0 || value > 1.8e19) {
        z2f::throw_usage_error(std::string("--") + option + ": expected a positive number, got '" +
                               text + "'");
    }
    return value;
}

std::uint64_t parse_count(const std::string& text, const char* option) {
    return static_cast<std::uint64_t>(std::llround(parse_number(text, option)));
}

z2f::DType parse_dtype(const std::string& text) {
    if (text == "bf16" || text == "bfloat16")
        return z2f::DType::kBF16;
    if (text == "fp16" || text == "float16" || text == "half")
        return z2f::DType::kF16;
    if (text == "fp32" || text == "float32")
        return z2f::DType::kF32;
    z2f::throw_usage_error("--dtype must be bf16, fp16 or fp32, not '" + text + "'");
}

Request parse(int argc, char** argv) {
    po::options_description visible(
        "Usage: zero2fp32-synth [options] OUT_DIR\n\n"
        "Writes a synthetic DeepSpeed ZeRO checkpoint (OUT_DIR/latest, OUT_DIR/<tag>/*.pt) of a\n"
        "Llama-shaped model. Run under mpirun/srun to split the files over processes.\n\n"
        "Options");
    // clang-format off
    visible.add_options()
        ("help,h", "show this help")
        ("version", "print the version")
        ("preset", po::value<std::string>()->default_value("tiny"),
         "model shape: tiny, 1b, 8b, 70b, 405b (Llama 3.x)")
        ("layers", po::value<std::uint64_t>(), "number of decoder layers")
        ("hidden", po::value<std::uint64_t>(), "hidden size (ffn and heads scale with it)")
        ("ffn", po::value<std::uint64_t>(), "MLP intermediate size")
        ("vocab", po::value<std::uint64_t>(), "vocabulary size")
        ("heads", po::value<std::uint64_t>(), "attention heads")
        ("kv-heads", po::value<std::uint64_t>(), "key/value heads (GQA)")
        ("params", po::value<std::string>(), "pick the layer count to approach this many parameters (e.g. 2e9)")
        ("stage", po::value<int>()->default_value(3), "ZeRO stage: 2 or 3")
        ("world-size,w", po::value<std::uint32_t>()->default_value(1), "data-parallel world size W (1..1024)")
        ("dtype", po::value<std::string>()->default_value("bf16"), "training dtype: bf16, fp16, fp32")
        ("tag", po::value<std::string>()->default_value("global_step2"), "checkpoint tag (folder name)")
        ("seed", po::value<std::uint64_t>()->default_value(0), "seed of the value function")
        ("param-groups", po::value<int>()->default_value(2),
         "optimizer param groups: 2 (Hugging Face Trainer: decay / no-decay) or 1")
        ("buffers", "add a float buffer (model.pos_scale) and an int64 model.position_ids")
        ("frozen", po::value<std::string>(),
         "freeze parameters: a regex searched in the names, or N (the first N in module order)")
        ("tied", "tie lm_head.weight to model.embed_tokens.weight (shared_params)")
        ("sub-group-size", po::value<std::string>()->default_value("1e9"),
         "stage 3 sub_group_size in elements")
        ("zero-stage-encoding", po::value<std::string>()->default_value("name"),
         "how zero_stage is pickled: name (getattr(ZeroStageEnum, 'weights'), Python 3.11) "
         "or value (ZeroStageEnum(3))")
        ("torch2", "torch 2.x files: extra zip records, fp32_flat_groups via _rebuild_from_type_v2")
        ("no-moments", "leave out the Adam moments (empty optimizer state): 4 B/param optimizer files")
        ("sparse", "write the Adam moments as file holes (no disk blocks)")
        ("sparse-masters", "also leave fp32 masters, module weights and frozen params as holes "
                           "(they read as zeros): metadata-only benchmarks")
        ("quiet,q", "print nothing but errors");
    // clang-format on
    po::options_description all;
    all.add(visible).add_options()("out-dir", po::value<std::string>());
    po::positional_options_description positional;
    positional.add("out-dir", 1);

    po::variables_map vm;
    try {
        po::store(po::command_line_parser(argc, argv).options(all).positional(positional).run(),
                  vm);
        po::notify(vm);
    } catch (const po::error& error) {
        z2f::throw_usage_error(error.what());
    }
    Request request;
    if (vm.count("help") != 0) {
        std::ostringstream text;
        text << visible
             << "\nExamples:\n"
                "  zero2fp32-synth --preset tiny --stage 3 --world-size 4 OUT\n"
                "  zero2fp32-synth --preset 8b --params 2e9 --stage 2 -w 8 --no-moments OUT\n"
                "  mpirun -n 16 zero2fp32-synth --preset 405b -w 512 --sparse-masters OUT\n";
        request.kind = Request::Kind::kHelp;
        request.help = text.str();
        return request;
    }
    if (vm.count("version") != 0) {
        request.kind = Request::Kind::kVersion;
        return request;
    }
    if (vm.count("out-dir") == 0) {
        z2f::throw_usage_error("no output directory given");
    }
    request.out_dir = vm["out-dir"].as<std::string>();
    request.quiet = vm.count("quiet") != 0;

    SynthOptions& o = request.options;
    const auto preset_name = vm["preset"].as<std::string>();
    auto preset = z2f::synth::llama_preset(preset_name);
    if (!preset) {
        z2f::throw_usage_error("unknown --preset '" + preset_name + "' (tiny, 1b, 8b, 70b, 405b)");
    }
    o.model.tied = vm.count("tied") != 0;
    z2f::synth::ShapeOverrides overrides;
    auto take = [&](const char* name, std::optional<std::uint64_t>& slot) {
        if (vm.count(name) != 0)
            slot = vm[name].as<std::uint64_t>();
    };
    take("layers", overrides.layers);
    take("hidden", overrides.hidden);
    take("ffn", overrides.ffn);
    take("vocab", overrides.vocab);
    take("heads", overrides.heads);
    take("kv-heads", overrides.kv_heads);
    if (vm.count("params") != 0) {
        if (overrides.layers)
            z2f::throw_usage_error("--params and --layers both pick the depth");
        overrides.target_params = parse_number(vm["params"].as<std::string>(), "params");
    }
    o.shape = z2f::synth::scale_shape(*preset, overrides, o.model.tied);
    o.model.dtype = parse_dtype(vm["dtype"].as<std::string>());
    o.model.buffers = vm.count("buffers") != 0;
    if (vm.count("frozen") != 0)
        o.model.frozen = vm["frozen"].as<std::string>();
    o.model.param_groups = vm["param-groups"].as<int>();
    o.stage = vm["stage"].as<int>();
    o.world = vm["world-size"].as<std::uint32_t>();
    o.tag = vm["tag"].as<std::string>();
    o.seed = vm["seed"].as<std::uint64_t>();
    o.sub_group_size = parse_count(vm["sub-group-size"].as<std::string>(), "sub-group-size");
    const auto encoding = vm["zero-stage-encoding"].as<std::string>();
    if (encoding == "name") {
        o.zero_stage_encoding = z2f::synth::ZeroStageEncoding::kByName;
    } else if (encoding == "value") {
        o.zero_stage_encoding = z2f::synth::ZeroStageEncoding::kByValue;
    } else {
        z2f::throw_usage_error("--zero-stage-encoding must be name or value");
    }
    o.torch2 = vm.count("torch2") != 0;
    o.moments = vm.count("no-moments") == 0;
    o.sparse_masters = vm.count("sparse-masters") != 0;
    o.sparse_moments = vm.count("sparse") != 0 || o.sparse_masters;
    if (!o.moments && o.sparse_moments && vm.count("sparse") != 0) {
        z2f::throw_usage_error("--no-moments and --sparse contradict each other");
    }
    return request;
}

int all_max(int value) {
    int result = value;
    MPI_Allreduce(&value, &result, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return result;
}

std::uint64_t all_sum(std::uint64_t value) {
    unsigned long long in = value;
    unsigned long long out = 0;
    MPI_Allreduce(&in, &out, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    return out;
}

std::string gigabytes(std::uint64_t bytes) {
    char text[32];
    std::snprintf(text, sizeof text, "%.3f GB", static_cast<double>(bytes) / 1e9);
    return text;
}

void report_error(int rank, const z2f::Error& error) {
    std::fprintf(stderr, "zero2fp32-synth[%d]: %s\n", rank, error.what());
}

}  // namespace

int main(int argc, char** argv) {
    z2f::mpi::start_mpi(&argc, &argv);
    int rank = 0;
    int size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const auto start = std::chrono::steady_clock::now();

    // Parsing is identical everywhere: every process reaches the same verdict without talking.
    Request request;
    std::optional<z2f::synth::SynthContext> context;
    try {
        request = parse(argc, argv);
        if (request.kind == Request::Kind::kRun) {
            context = z2f::synth::SynthContext::make(request.options);
        }
    } catch (const z2f::Error& error) {
        if (rank == 0) {
            std::fprintf(stderr, "zero2fp32-synth: %s\nTry 'zero2fp32-synth --help'.\n",
                         error.what());
        }
        MPI_Finalize();
        return static_cast<int>(z2f::cli::ExitCode::kUsage);
    }
    if (request.kind != Request::Kind::kRun) {
        if (rank == 0) {
            if (request.kind == Request::Kind::kHelp) {
                std::fputs(request.help.c_str(), stdout);
            } else {
                std::printf("zero2fp32-synth %s\n", z2f::kVersion);
            }
        }
        MPI_Finalize();
        return 0;
    }

    const std::string tag_dir = request.out_dir + "/" + request.options.tag;
    // Phase 1 (process 0): the folder exists and holds no state files of another checkpoint.
    int status = 0;
    if (rank == 0) {
        try {
            z2f::io::make_directories(tag_dir);
            auto foreign = z2f::synth::foreign_state_files(*context, tag_dir);
            if (!foreign.empty()) {
                z2f::throw_output_error("'" + tag_dir + "' already holds " +
                                        std::to_string(foreign.size()) +
                                        " state files of another checkpoint (e.g. " +
                                        foreign.front() + "); remove them or use another --tag");
            }
        } catch (const z2f::Error& error) {
            report_error(rank, error);
            status = static_cast<int>(z2f::cli::exit_code_for(error.kind()));
        }
    }
    status = all_max(status);

    // Phase 2: this process's share of the files.
    std::uint64_t file_bytes = 0;
    std::uint64_t written_bytes = 0;
    const auto files = z2f::synth::checkpoint_files(*context);
    if (status == 0) {
        try {
            for (std::size_t i = static_cast<std::size_t>(rank); i < files.size();
                 i += static_cast<std::size_t>(size)) {
                auto written = z2f::synth::write_checkpoint_file(*context, files[i], tag_dir);
                file_bytes += written.size;
                written_bytes += written.bytes_written;
            }
        } catch (const z2f::Error& error) {
            report_error(rank, error);
            status = static_cast<int>(z2f::cli::exit_code_for(error.kind()));
        }
        status = all_max(status);
    }
    file_bytes = all_sum(file_bytes);
    written_bytes = all_sum(written_bytes);

    // Phase 3: `latest` last, only over a complete folder.
    if (status == 0 && rank == 0) {
        try {
            z2f::synth::write_latest(request.out_dir, request.options.tag);
        } catch (const z2f::Error& error) {
            report_error(rank, error);
            status = static_cast<int>(z2f::cli::exit_code_for(error.kind()));
        }
    }
    if (status == 0 && rank == 0 && !request.quiet) {
        const auto& model = context->model;
        std::uint64_t params = 0;
        std::uint64_t trainable = 0;
        for (const auto& param : model.params) {
            params += param.numel();
            if (param.trainable)
                trainable += param.numel();
        }
        double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        std::printf(
            "zero2fp32-synth: %s: ZeRO-%d %s, W=%u, %s (%llu layers, hidden %llu): %llu params "
            "(%llu trainable); %zu files, %s (%s written) by %d process%s in %.2f s\n",
            tag_dir.c_str(), request.options.stage,
            std::string(z2f::dtype_display_name(model.dtype)).c_str(), request.options.world,
            model.shape.preset.c_str(), static_cast<unsigned long long>(model.shape.layers),
            static_cast<unsigned long long>(model.shape.hidden),
            static_cast<unsigned long long>(params), static_cast<unsigned long long>(trainable),
            files.size(), gigabytes(file_bytes).c_str(), gigabytes(written_bytes).c_str(), size,
            size == 1 ? "" : "es", seconds);
    }
    MPI_Finalize();
    return status;
}
