#include "cli/summary_json.hpp"

#include <nlohmann/json.hpp>

#include "common/dtype.hpp"
#include "zero2fp32/version.hpp"

namespace z2f::cli {

std::string summary_json(const ConvertRequest& request, const ConversionResult& result,
                         const ConversionError* error, ExitCode code) {
    // The run's own options: with --verify, those of OUT_DIR's run record.
    const Options& options = result.ranks > 0 ? result.options : request.options;
    nlohmann::ordered_json json;
    json["status"] = code == ExitCode::kOk ? "ok" : "error";
    json["exit_code"] = static_cast<int>(code);
    nlohmann::ordered_json errors = nlohmann::ordered_json::array();
    nlohmann::ordered_json complete = nlohmann::ordered_json::array();
    if (error != nullptr) {
        for (const RankFailure& failure : error->failures())
            errors.push_back({{"rank", failure.rank}, {"message", failure.message}});
        if (result.executed) {
            for (const FileReport& file : result.files) {
                if (file.complete)
                    complete.push_back(file.name);
            }
        }
    }
    json["errors"] = errors;
    json["complete_files_on_error"] = complete;
    json["version"] = kVersion;
    json["checkpoint"] = result.plan.checkpoint;
    json["tag"] = result.plan.tag;
    json["zero_stage"] = result.plan.zero_stage;
    json["world_size"] = result.plan.world_size;
    json["ds_version"] = result.plan.ds_version;
    json["ranks"] = result.ranks;
    if (const auto& grid = result.plan.parallel) {
        json["parallel"] = {{"kind", grid->kind}, {"tp", grid->tp}, {"pp", grid->pp},
                            {"ep", grid->ep},     {"dp", grid->dp}, {"zero", grid->zero}};
        if (grid->sp > 1)
            json["parallel"]["sp"] = grid->sp;
    }
    json["options"] = {
        {"format", enum_name(options.format)},
        {"dtype", std::string(dtype_display_name(options.dtype))},
        {"max_shard_size", options.max_shard_size ? nlohmann::ordered_json(*options.max_shard_size)
                                                  : nlohmann::ordered_json("none")},
        {"io", enum_name(options.io)},
        {"read_mode", enum_name(options.read_mode)},
        {"buffer_size", options.buffer_size},
        {"block_size", options.block_size},
        {"cast_all_buffers", options.cast_all_buffers},
        {"keep_frozen_dtype", options.keep_frozen_dtype},
        {"stage1_frozen", enum_name(options.stage1_frozen)},
        {"exclude_frozen", options.exclude_frozen},
        {"untie", options.untie},
        {"tp_rules", options.tp_rules},
        {"tp_replicated", enum_name(options.tp_replicated)},
        {"strip_vocab_padding", options.strip_vocab_padding},
        {"dry_run", options.dry_run},
        {"resume", options.resume},
        {"verify", options.verify}};
    json["tensors"] = result.plan.tensors.size();
    nlohmann::ordered_json files = nlohmann::ordered_json::array();
    for (const FileReport& file : result.files) {
        nlohmann::ordered_json entry = {
            {"name", file.name}, {"size", file.size}, {"skipped", file.kept}};
        if (!file.check.empty())
            entry["check"] = file.check;
        files.push_back(std::move(entry));
    }
    json["files"] = files;
    json["index"] = result.plan.index ? nlohmann::ordered_json(*result.plan.index)
                                      : nlohmann::ordered_json(nullptr);
    // For runs that wrote: what the last phase left on disk (every file may be complete while
    // the index or the record's "complete" is not).
    json["index_written"] = result.executed && result.index_written;
    json["record_complete"] = result.executed && result.record_complete;
    double seconds = result.wall_seconds;
    json["output_bytes"] = result.output_bytes;
    json["bytes_read"] = result.bytes_read;
    json["bytes_written"] = result.bytes_written;
    json["wall_seconds"] = seconds;
    json["gb_per_s"] = seconds > 0 ? static_cast<double>(result.output_bytes) / seconds / 1e9 : 0.0;
    json["peak_rss_bytes"] = result.peak_rss_bytes;
    json["peak_open_inputs"] = result.peak_open_inputs;
    json["io_wait_seconds"] = {{"reads", result.read_wait_seconds},
                               {"writes", result.write_wait_seconds}};
    nlohmann::ordered_json phases = nlohmann::ordered_json::object();
    for (const auto& [name, secs] : result.phase_seconds)
        phases[name] = secs;
    json["phase_seconds"] = phases;
    return json.dump(2) + "\n";
}

std::string error_summary_json(const std::string& message, ExitCode code) {
    nlohmann::ordered_json json;
    json["status"] = "error";
    json["exit_code"] = static_cast<int>(code);
    json["errors"] = nlohmann::ordered_json::array({{{"rank", 0}, {"message", message}}});
    json["complete_files_on_error"] = nlohmann::ordered_json::array();
    json["version"] = kVersion;
    json["files"] = nlohmann::ordered_json::array();
    return json.dump(2) + "\n";
}

}  // namespace z2f::cli
