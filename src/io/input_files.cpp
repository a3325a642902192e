#include "io/input_files.hpp"

#include <algorithm>

#include "common/errors.hpp"

namespace z2f::io {

InputFiles::InputFiles(std::vector<InputFile> inputs, std::size_t max_open)
    : inputs_(std::move(inputs)), max_open_(std::max<std::size_t>(max_open, 1)) {}

std::size_t InputFiles::default_capacity() {
    std::uint64_t limit = raise_open_file_limit();
    // Half of the limit, minus a reserve for MPI's sockets and shared-memory segments.
    std::uint64_t budget = limit > 128 ? (limit - 64) / 2 : limit / 4;
    return static_cast<std::size_t>(std::clamp<std::uint64_t>(budget, 4, 4096));
}

const File* InputFiles::find_open(std::uint32_t index) const {
    auto it = open_.find(index);
    return it == open_.end() ? nullptr : &it->second.file;
}

const File& InputFiles::get(std::uint32_t index) {
    auto it = open_.find(index);
    if (it != open_.end()) {
        lru_.splice(lru_.begin(), lru_, it->second.position);
        return it->second.file;
    }
    if (open_.size() >= max_open_) {
        std::uint32_t victim = lru_.back();
        lru_.pop_back();
        open_.erase(victim);
    }
    const InputFile& input = inputs_.at(index);
    File file = File::open_read(input.path);
    std::uint64_t size = file.size();
    if (size != input.size) {
        throw_input_error(input.path, "changed during the conversion: it was " +
                                          std::to_string(input.size) +
                                          " bytes when its metadata "
                                          "was read and is now " +
                                          std::to_string(size));
    }
    ++opens_;
    lru_.push_front(index);
    auto [entry, inserted] = open_.emplace(index, Entry{std::move(file), lru_.begin()});
    peak_open_ = std::max(peak_open_, open_.size());
    return entry->second.file;
}

}  // namespace z2f::io
