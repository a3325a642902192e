#include "cli/run_printer.hpp"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "common/byte_size.hpp"
#include "common/name_list.hpp"

namespace z2f::cli {

namespace {

// The file grid of a parallel checkpoint: degrees, then every file with its place.
void print_grid(std::FILE* out, const ConversionPlan& plan) {
    const ConversionPlan::ParallelGrid& grid = *plan.parallel;
    const std::string sp = grid.sp > 1 ? " x SP " + std::to_string(grid.sp) : "";
    std::fprintf(out, "grid: %s, TP %u x PP %u x DP %u%s, EP %u, %s\n", grid.kind.c_str(), grid.tp,
                 grid.pp, grid.dp, sp.c_str(), grid.ep,
                 grid.zero ? "weights from the ZeRO partitions"
                           : "no ZeRO partitions: weights from the model files");
    const std::string prefix = plan.checkpoint + "/";
    for (const ConversionPlan::ParallelGrid::File& file : grid.files) {
        std::string name =
            file.path.starts_with(prefix) ? file.path.substr(prefix.size()) : file.path;
        std::fprintf(out, "  %-52s %s\n", name.c_str(), file.role.c_str());
    }
}

}  // namespace

void print_dry_run(std::FILE* out, const ConversionResult& result) {
    const ConversionPlan& plan = result.plan;
    std::fprintf(out, "dry run: %zu tensors in %zu %s file(s), %d rank(s); nothing written\n",
                 plan.tensors.size(), plan.files.size(),
                 std::string(enum_name(plan.format)).c_str(), result.ranks);
    if (plan.parallel)
        print_grid(out, plan);
    std::vector<std::size_t> tensors_in(plan.files.size(), 0);
    for (const ConversionPlan::Tensor& tensor : plan.tensors) {
        for (std::size_t f = 0; f < plan.files.size(); ++f) {
            if (plan.files[f].name == tensor.file && tensor.alias_of.empty())
                ++tensors_in[f];
        }
    }
    // Neighbours in one folder with the same owners and state share a line (a universal
    // checkpoint's parameter folder: fp32, exp_avg, exp_avg_sq, step), so that thousands of
    // parameters stay one line each.
    struct Line {
        std::string name;
        std::uint64_t size = 0;
        std::size_t tensors = 0;
        std::string owners;
        bool kept = false;
    };
    std::vector<Line> lines;
    std::size_t width = 40;
    for (std::size_t f = 0; f < result.files.size();) {
        const FileReport& file = result.files[f];
        const std::size_t slash = file.name.find_last_of('/');
        const std::string folder = slash == std::string::npos ? "" : file.name.substr(0, slash);
        std::size_t end = f + 1;
        while (!folder.empty() && end < result.files.size() &&
               result.files[end].name.compare(0, folder.size() + 1, folder + "/") == 0 &&
               result.files[end].name.find('/', folder.size() + 1) == std::string::npos &&
               result.files[end].ranks == file.ranks && result.files[end].kept == file.kept) {
            ++end;
        }
        std::string name = file.name;
        std::uint64_t size = 0;
        std::size_t tensors = 0;
        std::string members;
        for (std::size_t g = f; g < end; ++g) {
            size += result.files[g].size;
            tensors += tensors_in[g];
            members += (g == f ? "" : ",") + result.files[g].name.substr(folder.size() + 1);
        }
        if (end - f > 1)
            name = folder + "/{" + members + "}";
        std::string owners;
        for (int rank : file.ranks)
            owners += (owners.empty() ? "" : ",") + std::to_string(rank);
        width = std::max(width, std::min<std::size_t>(name.size(), 100));
        lines.push_back({std::move(name), size, tensors, std::move(owners), file.kept});
        f = end;
    }
    for (const Line& line : lines) {
        std::fprintf(out, "  %-*s %14llu bytes  %4zu tensors  rank %s%s\n", static_cast<int>(width),
                     line.name.c_str(), static_cast<unsigned long long>(line.size), line.tensors,
                     line.owners.c_str(), line.kept ? "  (complete, skipped)" : "");
    }
    if (plan.index)
        std::fprintf(out, "  %s\n", plan.index->c_str());
    // Sequence parallelism keeps whole weights: no tensor is merged.
    if (plan.parallel && plan.parallel->sp == 1) {
        std::fprintf(out, "merge rule per tensor:\n");
        for (const ConversionPlan::Tensor& tensor : plan.tensors) {
            std::string how = !tensor.alias_of.empty() ? "tied to " + tensor.alias_of
                              : tensor.merge.empty()   ? std::string("as stored")
                                                       : tensor.merge;
            std::fprintf(out, "  %-60s %s\n", tensor.name.c_str(), how.c_str());
        }
    }
    if (!result.existing.empty()) {
        std::fprintf(out, "already in the output directory (what the run would do):\n");
        for (const ExistingFile& file : result.existing) {
            std::fprintf(out, "  %-40s %s\n", file.name.c_str(),
                         std::string(enum_name(file.action)).c_str());
        }
    }
    if (!result.refusal.empty())
        std::fprintf(out, "the run would refuse to start: %s\n", result.refusal.c_str());
    std::fprintf(out, "bytes to read per input file:\n");
    for (const InputReport& input : result.inputs) {
        std::fprintf(out, "  %-60s %14llu of %llu\n", input.path.c_str(),
                     static_cast<unsigned long long>(input.bytes_needed),
                     static_cast<unsigned long long>(input.size));
    }
}

void print_done(std::FILE* out, const ConversionResult& result) {
    double seconds = result.wall_seconds;
    double rate = seconds > 0 ? static_cast<double>(result.output_bytes) / seconds / 1e9 : 0.0;
    std::fprintf(out,
                 "done: %zu tensors, %zu file(s), %s in %s (%.3f GB/s); read %s, wrote %s, "
                 "peak RSS %s per rank\n",
                 result.plan.tensors.size(), result.files.size(),
                 format_byte_size(result.output_bytes).c_str(), format_duration(seconds).c_str(),
                 rate, format_byte_size(result.bytes_read).c_str(),
                 format_byte_size(result.bytes_written).c_str(),
                 format_byte_size(result.peak_rss_bytes).c_str());
}

void print_failure(std::FILE* out, const ConversionError& error, int verbosity) {
    std::string messages = error.what();
    std::size_t begin = 0;
    while (begin <= messages.size()) {
        std::size_t end = messages.find('\n', begin);
        if (end == std::string::npos)
            end = messages.size();
        std::string line = messages.substr(begin, end - begin);
        // Continuation lines (lists under a message) keep their indentation.
        if (!line.empty() && line[0] == ' ')
            std::fprintf(out, "%s\n", line.c_str());
        else
            std::fprintf(out, "zero2fp32-mpi: error: %s\n", line.c_str());
        begin = end + 1;
    }
    const ConversionResult& partial = error.partial_result();
    if (!partial.executed)
        return;
    // What is on disk now, as a person deciding what to do next needs it.
    std::vector<std::string> complete;
    for (const FileReport& file : partial.files) {
        if (file.complete)
            complete.push_back(file.name);
    }
    const std::optional<std::string>& index = partial.plan.index;
    const std::size_t total = partial.files.size();
    if (complete.size() == total && total > 0) {
        if (index && !partial.index_written) {
            std::fprintf(out,
                         "zero2fp32-mpi: all %zu output file(s) are complete, but %s was not "
                         "written: rerun with --resume to write it (no file is written again)\n",
                         total, index->c_str());
        } else if (!partial.record_complete) {
            std::fprintf(out,
                         "zero2fp32-mpi: the output is complete on disk (%zu file(s)%s%s), but "
                         "its run record could not be marked complete: rerun with --resume to "
                         "finish (no file is written again)\n",
                         total, index ? " and " : "", index ? index->c_str() : "");
        }
        return;
    }
    const std::string missing_index = !index ? std::string()
                                      : partial.plan.format == OutputFormat::kUniversal
                                          ? *index + " not updated; "
                                          : "no index written; ";
    std::fprintf(out, "zero2fp32-mpi: %s%zu of %zu output file(s) are complete%s%s\n",
                 missing_index.c_str(), complete.size(), total,
                 complete.empty() ? "" : " (rerun with --resume to finish): ",
                 listed_names(complete, verbosity > 0 ? 0 : kNamesShown).c_str());
}

}  // namespace z2f::cli
