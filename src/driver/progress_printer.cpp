#include "driver/progress_printer.hpp"

#include <ctime>

namespace z2f::driver {

ProgressPrinter::ProgressPrinter(std::FILE* out, bool enabled, bool live)
    : out_(out), enabled_(enabled), live_(live) {}

std::string ProgressPrinter::format_bytes(std::uint64_t bytes) {
    char text[32];
    double value = static_cast<double>(bytes);
    if (value >= 1e12)
        std::snprintf(text, sizeof text, "%.2f TB", value / 1e12);
    else if (value >= 1e9)
        std::snprintf(text, sizeof text, "%.2f GB", value / 1e9);
    else if (value >= 1e6)
        std::snprintf(text, sizeof text, "%.1f MB", value / 1e6);
    else if (value >= 1e3)
        std::snprintf(text, sizeof text, "%.1f kB", value / 1e3);
    else
        std::snprintf(text, sizeof text, "%llu B", static_cast<unsigned long long>(bytes));
    return text;
}

std::string ProgressPrinter::format_duration(double seconds) {
    char text[32];
    if (seconds < 60) {
        std::snprintf(text, sizeof text, "%.1fs", seconds);
    } else {
        auto whole = static_cast<long long>(seconds);
        std::snprintf(text, sizeof text, "%lld:%02lld:%02lld", whole / 3600, whole / 60 % 60,
                      whole % 60);
    }
    return text;
}

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
                  format_bytes(done).c_str(), format_bytes(total_).c_str(), rate / 1e9);
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

}  // namespace z2f::driver
