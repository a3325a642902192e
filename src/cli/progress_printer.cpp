#include "cli/progress_printer.hpp"

#include <ctime>

#include "common/byte_size.hpp"

namespace z2f::cli {

ProgressPrinter::ProgressPrinter(std::FILE* out, bool enabled, bool live)
    : out_(out), enabled_(enabled), live_(live) {}

void ProgressPrinter::start(std::uint64_t total_bytes) {
    total_ = total_bytes;
    start_ = last_ = std::chrono::steady_clock::now();
}

std::string ProgressPrinter::line(std::uint64_t done, double elapsed) const {
    double rate = elapsed > 0 ? static_cast<double>(done) / elapsed : 0.0;
    double fraction = total_ > 0 ? static_cast<double>(done) / static_cast<double>(total_) : 1.0;
    std::string text;
    if (live_) {
        constexpr int kWidth = 30;
        int filled = static_cast<int>(fraction * kWidth);
        text = "[" + std::string(static_cast<std::size_t>(filled), '#') +
               std::string(static_cast<std::size_t>(kWidth - filled), '.') + "] ";
    }
    char numbers[160];
    std::snprintf(numbers, sizeof numbers, "%5.1f%%  %s / %s  %.2f GB/s", 100.0 * fraction,
                  format_byte_size(done).c_str(), format_byte_size(total_).c_str(), rate / 1e9);
    text += numbers;
    if (rate > 0 && done < total_) {
        text += "  ETA " + format_duration(static_cast<double>(total_ - done) / rate);
    }
    return text;
}

void ProgressPrinter::update(std::uint64_t done_bytes) {
    if (!enabled_)
        return;
    auto now = std::chrono::steady_clock::now();
    auto interval = live_ ? std::chrono::milliseconds(200) : std::chrono::milliseconds(5000);
    if (now - last_ < interval)
        return;
    last_ = now;
    double elapsed = std::chrono::duration<double>(now - start_).count();
    if (live_) {
        std::fprintf(out_, "\r%s\033[K", line(done_bytes, elapsed).c_str());
        drawn_ = true;
    } else {
        std::time_t wall = std::time(nullptr);
        char stamp[32];
        std::strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", std::localtime(&wall));
        std::fprintf(out_, "[%s] progress %s\n", stamp, line(done_bytes, elapsed).c_str());
    }
    std::fflush(out_);
}

void ProgressPrinter::finish(std::uint64_t done_bytes) {
    if (!enabled_)
        return;
    if (live_ && drawn_) {
        double elapsed =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
        std::fprintf(out_, "\r%s\033[K\n", line(done_bytes, elapsed).c_str());
        std::fflush(out_);
    }
}

}  // namespace z2f::cli
