// Read-only access to the plan's input files through a bounded cache of open descriptors.
//
// A ZeRO-3 conversion at W = 1,024 may read from every rank file on every rank; keeping them
// all open would exceed the usual 1,024-descriptor limit. Files are opened on first use and
// the least recently used one is closed when `max_open` are open. Every open checks that the
// file still has the size recorded when its metadata was read: a checkpoint that changes under
// a running conversion is an error, not silently mixed data.
#pragma once

#include <cstdint>
#include <list>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/extent.hpp"
#include "io/posix_file.hpp"

namespace z2f::io {

class InputFiles {
  public:
    InputFiles(std::vector<InputFile> inputs, std::size_t max_open);

    const File& get(std::uint32_t index);
    // The file if it is open now, else nullptr (never opens one).
    const File* find_open(std::uint32_t index) const;
    const InputFile& info(std::uint32_t index) const { return inputs_.at(index); }
    std::size_t open_count() const noexcept { return lru_.size(); }
    std::size_t peak_open() const noexcept { return peak_open_; }
    std::uint64_t opens() const noexcept { return opens_; }

    // How many descriptors the cache may use given the process limit (raised to the hard
    // limit first), leaving room for MPI, HDF5 and the output files.
    static std::size_t default_capacity();

  private:
    struct Entry {
        File file;
        std::list<std::uint32_t>::iterator position;
    };
    std::vector<InputFile> inputs_;
    std::size_t max_open_;
    std::list<std::uint32_t> lru_;  // most recent first
    std::unordered_map<std::uint32_t, Entry> open_;
    std::size_t peak_open_ = 0;
    std::uint64_t opens_ = 0;
};

}  // namespace z2f::io
