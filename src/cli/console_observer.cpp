#include "cli/console_observer.hpp"

#include <string>
#include <unistd.h>

namespace z2f::cli {
namespace {

const char* role_name(TensorRole role) {
    switch (role) {
        case TensorRole::kBuffer:
            return "buffer";
        case TensorRole::kFrozen:
            return "frozen";
        case TensorRole::kTrainable:
            return "trainable";
        case TensorRole::kAlias:
            return "tied";
    }
    return "?";
}

}  // namespace

ConsoleObserver::ConsoleObserver(std::FILE* out, int verbosity, ProgressMode progress)
    : out_(out), verbosity_(verbosity), mode_(progress) {}

void ConsoleObserver::message(MessageLevel level, std::string_view text) {
    int needed = level == MessageLevel::kVerbose ? 1 : 0;
    if (verbosity_ < needed)
        return;
    std::fprintf(out_, "%s%.*s\n", level == MessageLevel::kWarning ? "warning: " : "",
                 static_cast<int>(text.size()), text.data());
}

// -d/--debug: one line per tensor, as zero_to_fp32 --debug prints them.
void ConsoleObserver::planned(const ConversionPlan& plan) {
    if (verbosity_ < 2)
        return;
    for (const ConversionPlan::Tensor& tensor : plan.tensors) {
        std::string shape;
        std::uint64_t numel = 1;
        for (std::uint64_t dim : tensor.shape) {
            shape += (shape.empty() ? "" : ", ") + std::to_string(dim);
            numel *= dim;
        }
        std::string source =
            tensor.alias_of.empty() ? "in " + tensor.file : "alias of " + tensor.alias_of;
        if (!tensor.merge.empty())
            source += "; " + tensor.merge;
        std::fprintf(out_, "%s full shape: (%s) unpartitioned numel %llu  [%s, %s -> %s, %s]\n",
                     tensor.name.c_str(), shape.c_str(), static_cast<unsigned long long>(numel),
                     role_name(tensor.role), std::string(dtype_name(tensor.source_dtype)).c_str(),
                     std::string(dtype_name(tensor.dtype)).c_str(), source.c_str());
    }
}

void ConsoleObserver::progress_started(std::uint64_t total) {
    bool enabled = verbosity_ >= 0 && mode_ != ProgressMode::kNever &&
                   (mode_ == ProgressMode::kAlways || total > 0);
    printer_.emplace(out_, enabled, ::isatty(::fileno(out_)) == 1);
    printer_->start(total);
}

void ConsoleObserver::progress(std::uint64_t done) {
    if (printer_)
        printer_->update(done);
}

void ConsoleObserver::progress_finished(std::uint64_t done) {
    if (printer_)
        printer_->finish(done);
}

}  // namespace z2f::cli
