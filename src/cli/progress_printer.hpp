// Rank 0's progress display: bytes done / total, GB/s and ETA. On a terminal a live bar
// redrawn in place; otherwise (Slurm logs) a timestamped line every few seconds; nothing when
// disabled (-q, --progress never).
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace z2f::cli {

class ProgressPrinter {
  public:
    ProgressPrinter(std::FILE* out, bool enabled, bool live);

    void start(std::uint64_t total_bytes);
    // Rate-limited: prints at most a few times per second (live) or every 5 s (lines).
    void update(std::uint64_t done_bytes);
    void finish(std::uint64_t done_bytes);

  private:
    std::string line(std::uint64_t done, double elapsed) const;

    std::FILE* out_;
    bool enabled_;
    bool live_;
    std::uint64_t total_ = 0;
    std::chrono::steady_clock::time_point start_{};
    std::chrono::steady_clock::time_point last_{};
    bool drawn_ = false;
};

}  // namespace z2f::cli
