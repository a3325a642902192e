#include "driver/destination/inspection.hpp"

#include <algorithm>
#include <set>

#include "checkpoint/discovery.hpp"
#include "common/byte_size.hpp"
#include "common/crc32.hpp"
#include "common/errors.hpp"
#include "driver/destination/folders.hpp"
#include "io/posix_file.hpp"
#include "zero2fp32/version.hpp"

namespace z2f::driver {
namespace {

std::string list(const std::vector<std::string>& names, std::size_t max = 8) {
    std::string out;
    for (std::size_t i = 0; i < names.size() && i < max; ++i) {
        out += (i == 0 ? "" : ", ") + names[i];
    }
    if (names.size() > max) {
        out += ", ... (" + std::to_string(names.size()) + " in all)";
    }
    return out;
}

// "model-00001-of-00004": the shard suffix of huggingface_hub's naming.
bool is_shard_suffix(std::string_view text) {
    auto digits = [](std::string_view s) {
        return s.size() == 5 &&
               std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
    };
    return text.size() == 15 && text[0] == '-' && digits(text.substr(1, 5)) &&
           text.substr(6, 4) == "-of-" && digits(text.substr(10, 5));
}

bool header_matches(const std::string& path, const run::OutputFileRecord& planned) {
    try {
        io::File file = io::File::open_read(path);
        if (file.size() != planned.layout.size) {
            return false;
        }
        std::vector<std::byte> header(static_cast<std::size_t>(planned.header_length));
        file.read_exact(0, header);
        return crc32_of(header) == planned.header_crc32;
    } catch (const Error&) {
        return false;
    }
}

}  // namespace

std::string temp_path(const std::string& output_dir, const std::string& name) {
    return io::temp_name_of(output_dir + "/" + name);
}

bool is_output_like_name(OutputFormat format, const std::string& name) {
    std::string stem;
    std::string extension;
    switch (format) {
        case OutputFormat::kSafetensors:
            stem = "model";
            extension = ".safetensors";
            break;
        case OutputFormat::kTorch:
            stem = "pytorch_model";
            extension = ".bin";
            break;
        case OutputFormat::kHdf5:
            stem = "model";
            extension = ".h5";
            break;
        case OutputFormat::kUniversal:
            // Its files lie in its own folder, where every unplanned file is another run's
            // (unplanned_files_in_output_folder); nothing in OUT_DIR itself is.
            return false;
    }
    if (name == stem + extension + ".index.json" || name == stem + extension) {
        return true;
    }
    if (!name.starts_with(stem) || !name.ends_with(extension)) {
        return false;
    }
    return is_shard_suffix(
        std::string_view(name).substr(stem.size(), name.size() - stem.size() - extension.size()));
}

RunManifest manifest_of(const run::RunPlan& plan, const Options& options, bool complete) {
    RunManifest manifest;
    manifest.complete = complete;
    manifest.tag_dir = plan.checkpoint.tag_dir;
    manifest.tag = plan.checkpoint.tag;
    for (const InputFile& input : plan.tensors.inputs)
        manifest.inputs.push_back({input.path, input.size});
    manifest.shape = options;
    manifest.run_identity = plan.identity;
    manifest.index_name = plan.index_name;
    for (const run::OutputFileRecord& file : plan.files) {
        manifest.files.push_back(
            {file.name(), file.layout.size, file.header_length, file.header_crc32});
    }
    return manifest;
}

OutputDirDecision inspect_output_dir(const run::RunPlan& plan, const std::string& dir,
                                     const OutputDirPolicy& policy) {
    OutputDirDecision decision;
    // What the run would stop with; under report_only the first reason is kept and the
    // inspection goes on, so that --dry-run can show every file's fate.
    auto refuse = [&](const std::string& why, ErrorKind kind = ErrorKind::kOutput) {
        if (!policy.report_only)
            throw Error(kind, why);
        if (decision.refusal.empty())
            decision.refusal = why;
    };
    if (io::path_exists(dir) && !io::is_directory(dir)) {
        throw_output_error("output path '" + dir + "' exists and is not a directory");
    }
    decision.directory_exists = io::is_directory(dir);

    // Where the files will land: OUT_DIR, or its nearest existing ancestor when it is created.
    std::string existing = dir;
    while (!io::is_directory(existing)) {
        auto slash = existing.find_last_of('/');
        existing = slash == std::string::npos ? "." : slash == 0 ? "/" : existing.substr(0, slash);
    }
    if (!io::is_writable_directory(existing)) {
        refuse("cannot write to '" + existing + "'" +
               (existing == dir ? "" : " (to create '" + dir + "')") + ": permission denied");
    }

    std::vector<std::string> present;
    std::set<std::string> planned;
    for (const run::OutputFileRecord& file : plan.files)
        planned.insert(file.name());
    // latest_universal is a pointer that moves on, as DeepSpeed's `latest` does: replaced (in
    // one rename) once the new folder is complete, never a conflict, never removed before.
    if (plan.index_name && plan.format != OutputFormat::kUniversal)
        planned.insert(*plan.index_name);
    std::optional<RunManifest> manifest;
    if (decision.directory_exists) {
        // By name: planned files may lie in folders of OUT_DIR.
        for (const std::string& name : planned) {
            if (io::path_exists(dir + "/" + name))
                present.push_back(name);
        }
        for (const std::string& name : io::list_directory(dir)) {
            if (planned.count(name) == 0 && is_output_like_name(plan.format, name))
                decision.stale.push_back(name);
        }
        for (std::string& name : unplanned_files_in_output_folder(plan, dir))
            decision.stale.push_back(std::move(name));
        const std::string manifest_file = manifest_path(plan, dir);
        if (policy.resume && io::path_exists(manifest_file)) {
            manifest = decode_manifest(io::read_small_file(manifest_file, 64u << 20));
            if (!manifest) {
                refuse("'" + manifest_file +
                           "' is not a run record this version of zero2fp32-mpi can read, so "
                           "--resume cannot tell whose outputs '" +
                           dir + "' holds; use --overwrite to start over",
                       ErrorKind::kUsage);
            }
        }
        if (plan.index_name && io::is_regular_file(dir + "/" + *plan.index_name)) {
            decision.index_current =
                io::read_small_file(dir + "/" + *plan.index_name, 1u << 30) == plan.index_json;
        }
    }
    std::sort(present.begin(), present.end());
    std::sort(decision.stale.begin(), decision.stale.end());

    if (!decision.stale.empty() && !policy.overwrite) {
        refuse("'" + dir + "' holds other outputs that would be mixed with this run's: " +
               list(decision.stale) + "; remove them or use --overwrite");
    }
    const bool refused_present = !present.empty() && !policy.overwrite && !policy.resume;
    if (refused_present) {
        refuse("'" + dir + "' already holds output files of this run's names: " + list(present) +
               "; use --overwrite to replace them or --resume to complete an interrupted run");
    }

    // --resume continues the run its record describes, and nothing else: another run's output
    // (another checkpoint, other inputs or options), or outputs without a record of this tool,
    // are never replaced by it (--overwrite is the way to replace them).
    std::set<std::string> kept;
    bool same_run = false;
    if (policy.resume && manifest) {
        const std::vector<std::string> differences =
            run_differences(*manifest, manifest_of(plan, policy.shape, false));
        if (!differences.empty()) {
            std::string listed;
            for (const std::string& difference : differences)
                listed += "\n  " + difference;
            refuse("'" + dir +
                       "' holds the output of another run, which --resume does not replace "
                       "(use --overwrite to replace it, or another OUT_DIR); its run record "
                       "differs from this run:" +
                       listed,
                   ErrorKind::kUsage);
        } else if (manifest->version != kVersion) {
            decision.resume_note = "the run record in '" + dir + "' is of zero2fp32-mpi " +
                                   manifest->version + ": every file is written again";
        } else if (manifest->run_identity != plan.identity) {
            refuse("'" + dir +
                       "' holds the output of another run, which --resume does not "
                       "replace (use --overwrite to replace it, or another OUT_DIR): its run "
                       "record describes other inputs",
                   ErrorKind::kUsage);
        } else {
            same_run = true;
        }
    } else if (policy.resume && !present.empty()) {
        refuse("'" + dir + "' holds " + list(present) + " but no run record (" + kManifestName +
                   "): these are not the outputs of a run of zero2fp32-mpi that --resume could "
                   "continue; use --overwrite to replace them, or another OUT_DIR",
               ErrorKind::kUsage);
    }
    // Only a record of this version describes the run the way this version's plan does.
    if (same_run) {
        for (std::uint32_t f = 0; f < plan.files.size(); ++f) {
            const run::OutputFileRecord& file = plan.files[f];
            auto entry = std::find_if(manifest->files.begin(), manifest->files.end(),
                                      [&](const ManifestFile& m) { return m.name == file.name(); });
            if (entry != manifest->files.end() && entry->size == file.layout.size &&
                entry->header_crc32 == file.header_crc32 &&
                entry->header_length == file.header_length &&
                header_matches(dir + "/" + file.name(), file)) {
                decision.complete.push_back(f);
                kept.insert(file.name());
            }
        }
    }
    const bool keep_index = policy.resume && decision.index_current;
    if (keep_index)
        kept.insert(*plan.index_name);
    for (const std::string& name : present) {
        if (kept.count(name) == 0)
            decision.replaced.push_back(name);
        ExistingAction action = refused_present         ? ExistingAction::kRefuse
                                : kept.count(name) != 0 ? ExistingAction::kKeep
                                                        : ExistingAction::kRewrite;
        decision.existing.push_back({name, action});
    }
    for (const std::string& name : decision.stale) {
        decision.existing.push_back(
            {name, policy.overwrite ? ExistingAction::kRemove : ExistingAction::kRefuse});
    }

    if (policy.space_check) {
        std::uint64_t needed = 0;
        for (const run::OutputFileRecord& file : plan.files) {
            if (kept.count(file.name()) == 0)
                needed += file.layout.size;
        }
        std::uint64_t free = io::free_bytes(existing);
        // Files being replaced free their space only when replaced; do not count on it.
        if (needed > free) {
            refuse("not enough space in '" + existing + "': the output needs " +
                   format_byte_size(needed) + ", " + format_byte_size(free) +
                   " are free (--no-space-check skips this check)");
        }
    }
    return decision;
}

std::vector<std::string> run_temp_names(const run::RunPlan& plan) {
    std::vector<std::string> names;
    for (const run::OutputFileRecord& file : plan.files)
        names.push_back(file.name() + std::string(io::kTempSuffix));
    if (plan.index_name)
        names.push_back(*plan.index_name + std::string(io::kTempSuffix));
    const std::string record =
        plan.output_folder.empty() ? kManifestName : plan.output_folder + "/" + kManifestName;
    names.push_back(record + std::string(io::kTempSuffix));
    if (plan.format != OutputFormat::kUniversal &&
        io::is_directory(plan.checkpoint.checkpoint_dir)) {
        for (const std::string& side :
             checkpoint::find_hf_side_files(plan.checkpoint.checkpoint_dir))
            names.push_back(side + std::string(io::kTempSuffix));
    }
    return names;
}

void remove_leftover_temp_files(const run::RunPlan& plan, const std::string& dir) {
    if (!io::is_directory(dir))
        return;
    for (const std::string& name : run_temp_names(plan)) {
        if (io::path_exists(dir + "/" + name))
            io::remove_file(dir + "/" + name);
    }
}

void prepare_output_dir(const run::RunPlan& plan, const std::string& dir, const Options& options,
                        const OutputDirDecision& decision) {
    // --resume of a finished output: every file is kept, nothing but a failed run's temp files
    // is touched.
    if (plan.bytes_to_write() == 0 && decision.replaced.empty() && decision.stale.empty()) {
        remove_leftover_temp_files(plan, dir);
        return;
    }
    io::make_directories(dir);
    for (const std::string& name : decision.replaced) {
        io::remove_file(dir + "/" + name);
    }
    for (const std::string& name : decision.stale) {
        io::remove_file(dir + "/" + name);
    }
    // After the removals: a stale file may stand where a folder of this run goes.
    for (const std::string& folder : output_subfolders(plan))
        io::make_directories(dir + "/" + folder);
    remove_leftover_temp_files(plan, dir);
    io::write_file_atomically(manifest_path(plan, dir),
                              encode_manifest(manifest_of(plan, options, false)));
    if (!plan.output_folder.empty())
        io::sync_directory(dir + "/" + plan.output_folder);  // the manifest's folder
    io::sync_directory(dir);
}

}  // namespace z2f::driver
