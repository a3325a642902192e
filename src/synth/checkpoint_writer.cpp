#include "synth/checkpoint_writer.hpp"

#include <algorithm>
#include <cstdio>
#include <set>

#include "common/bytes.hpp"
#include "common/errors.hpp"
#include "container/zip_writer.hpp"
#include "io/posix_file.hpp"
#include "synth/states_pickles.hpp"
#include "synth/value_function.hpp"

namespace z2f::synth {
namespace {

bool ends_with(const std::string& text, const std::string& suffix) {
    return text.size() >= suffix.size() &&
           text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// torch 2.x writes a random 40-digit id; ours is derived from the seed and the file name so
// that reruns and any process split give identical bytes.
std::string serialization_id(const SynthContext& context, const std::string& file_name) {
    std::uint64_t a = mix64(context.options.seed ^ fnv1a64(file_name));
    std::uint64_t b = mix64(a);
    char text[41];
    // A uint64 has at most 20 decimal digits.
    std::snprintf(text, sizeof text, "%020llu%020llu", static_cast<unsigned long long>(a),
                  static_cast<unsigned long long>(b));
    return text;
}

}  // namespace

std::vector<SynthFile> checkpoint_files(const SynthContext& context) {
    std::vector<SynthFile> files;
    const std::uint32_t world = context.world();
    // The bf16_ prefix follows bf16.enabled, whatever the stage.
    const std::string prefix = context.model_dtype() == DType::kBF16 ? "bf16_" : "";
    for (std::uint32_t r = 0; r < world; ++r) {
        files.push_back(
            {prefix + "zero_pp_rank_" + std::to_string(r) + "_mp_rank_00_optim_states.pt", true,
             r});
    }
    if (context.options.stage == 2) {
        files.push_back({"mp_rank_00_model_states.pt", false, 0});
    } else {
        for (std::uint32_t r = 0; r < world; ++r) {
            files.push_back(
                {"zero_pp_rank_" + std::to_string(r) + "_mp_rank_00_model_states.pt", false, r});
        }
    }
    return files;
}

WrittenFile write_checkpoint_file(const SynthContext& context, const SynthFile& file,
                                  const std::string& tag_dir) {
    PickledFile content = file.optim ? optim_states_pickle(context, file.rank)
                                     : model_states_pickle(context, file.rank);
    const bool torch2 = context.options.torch2;
    WrittenFile written;
    container::zip::TorchZipWriter zip(tag_dir + "/" + file.name);
    zip.add_record("data.pkl", content.pickle);
    written.bytes_written += content.pickle.size();
    if (torch2) {
        zip.add_record(".format_version", as_byte_span("1"));
        zip.add_record(".storage_alignment", as_byte_span("64"));
        zip.add_record("byteorder", as_byte_span("little"));
    }
    for (const StorageRecord& record : content.records) {
        const std::string name = "data/" + record.key;
        const std::uint64_t size = record.content.size_bytes();
        if (record.content.hole()) {
            zip.add_zero_record(name, size);
            continue;
        }
        zip.add_record_from(name, size, [&](std::uint64_t offset, std::span<std::byte> out) {
            record.content.produce(offset, out);
        });
        written.bytes_written += size;
    }
    zip.add_record("version", as_byte_span("3\n"));
    if (torch2) {
        zip.add_record(".data/serialization_id",
                       as_byte_span(serialization_id(context, file.name)));
    }
    zip.finish();
    written.size = zip.bytes_written();
    return written;
}

std::vector<std::string> foreign_state_files(const SynthContext& context,
                                             const std::string& tag_dir) {
    std::vector<std::string> foreign;
    if (!io::is_directory(tag_dir)) {
        return foreign;
    }
    std::set<std::string> ours;
    for (const SynthFile& file : checkpoint_files(context)) {
        ours.insert(file.name);
    }
    for (const std::string& name : io::list_directory(tag_dir)) {
        if ((ends_with(name, "_states.pt") || ends_with(name, "-model_states.pt")) &&
            ours.count(name) == 0) {
            foreign.push_back(name);
        }
    }
    std::sort(foreign.begin(), foreign.end());
    return foreign;
}

void write_latest(const std::string& checkpoint_dir, const std::string& tag) {
    io::write_file_atomically(checkpoint_dir + "/latest", tag);
}

void write_checkpoint(const SynthContext& context, const std::string& checkpoint_dir) {
    const std::string tag_dir = checkpoint_dir + "/" + context.options.tag;
    io::make_directories(tag_dir);
    std::vector<std::string> foreign = foreign_state_files(context, tag_dir);
    if (!foreign.empty()) {
        throw_output_error("'" + tag_dir + "' already holds state files of another checkpoint (" +
                           foreign.front() + ", ...)");
    }
    for (const SynthFile& file : checkpoint_files(context)) {
        write_checkpoint_file(context, file, tag_dir);
    }
    write_latest(checkpoint_dir, context.options.tag);
}

}  // namespace z2f::synth
