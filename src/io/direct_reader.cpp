#include "io/direct_reader.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <string>
#include <unordered_map>

#include "common/errors.hpp"

namespace z2f::io {
namespace {

constexpr std::uint64_t kPage = 4096;
constexpr std::uint64_t kSampleBytes = std::uint64_t{256} << 10;

constexpr std::uint64_t round_down(std::uint64_t value, std::uint64_t alignment) {
    return value / alignment * alignment;
}
constexpr std::uint64_t round_up(std::uint64_t value, std::uint64_t alignment) {
    return (value + alignment - 1) / alignment * alignment;
}

}  // namespace

double sample_cached_fraction(const std::vector<std::string>& paths,
                              std::span<const ReadRange> ranges, std::size_t samples) {
    std::uint64_t total = 0;
    for (const ReadRange& range : ranges) {
        total += range.length;
    }
    if (total == 0 || samples == 0) {
        return 0.0;
    }
    std::unordered_map<std::uint32_t, File> open;
    double weighted = 0.0;
    double weight = 0.0;
    // Sample i sits at byte (i + 1/2) * total / samples of the ranges laid end to end.
    std::size_t range = 0;
    std::uint64_t range_start = 0;  // position of ranges[range] in that concatenation
    for (std::size_t i = 0; i < samples; ++i) {
        const auto at =
            static_cast<std::uint64_t>((static_cast<double>(i) + 0.5) * static_cast<double>(total) /
                                       static_cast<double>(samples));
        while (range_start + ranges[range].length <= at) {
            range_start += ranges[range].length;
            ++range;
        }
        const ReadRange& where = ranges[range];
        const std::uint64_t offset = where.offset + (at - range_start);
        const std::uint64_t length = std::min(kSampleBytes, where.offset + where.length - offset);
        auto found = open.find(where.file);
        if (found == open.end()) {
            found = open.emplace(where.file, File::open_read(paths.at(where.file))).first;
        }
        weighted += found->second.cached_fraction(offset, length) * static_cast<double>(length);
        weight += static_cast<double>(length);
    }
    return weighted / weight;
}

DirectReader::DirectReader(std::vector<std::string> paths, std::vector<ReadRange> ranges,
                           const DirectReaderOptions& options, std::unique_ptr<AsyncIo> engine)
    : paths_(std::move(paths)), ranges_(std::move(ranges)) {
    for (const ReadRange& range : ranges_) {
        if (range.file >= paths_.size()) {
            throw_internal_error("DirectReader: a range names file " + std::to_string(range.file) +
                                 " of " + std::to_string(paths_.size()));
        }
    }
    std::size_t block = std::max<std::size_t>(options.block_size / kPage, 1) * kPage;
    std::size_t count =
        std::min(std::max<std::size_t>(options.blocks_in_flight, 1), options.memory_budget / block);
    if (count == 0) {
        block = std::max<std::size_t>(options.memory_budget / kPage, 1) * kPage;
        count = 1;
    }
    block_size_ = block;
    unit_budget_ = options.unit_cache_bytes;

    switch (options.mode) {
        case ReadMode::kDirect:
            direct_ = true;
            break;
        case ReadMode::kBuffered:
            direct_ = false;
            break;
        case ReadMode::kAuto:
            sampled_fraction_ = sample_cached_fraction(paths_, ranges_, options.warm_samples);
            direct_ = sampled_fraction_ < options.warm_threshold;
            break;
    }

    inputs_.resize(paths_.size());
    blocks_.reserve(count);
    for (std::size_t i = 0; i < count; ++i) {
        blocks_.emplace_back(kPage, block, options.huge_pages);
    }
    for (std::size_t i = count; i > 0; --i) {
        free_blocks_.push_back(i - 1);
    }
    io_ = engine ? std::move(engine) : make_async_io(options.engine, count);
    if (io_->depth() < count) {
        throw_internal_error("DirectReader: engine shallower than the blocks");
    }
}

DirectReader::~DirectReader() {
    io_.reset();  // waits for the reads the kernel has
}

DirectReader::InputState& DirectReader::input(std::uint32_t file) {
    auto& slot = inputs_[file];
    if (slot) {
        return *slot;
    }
    auto state = std::make_unique<InputState>();
    const std::string& path = paths_[file];
    if (direct_) {
        if (auto opened = File::try_open_direct(path, DirectOpen::kRead)) {
            DirectIoAlignment dio = opened->direct_io_alignment();
            const std::uint64_t granule = std::max<std::uint64_t>(kPage, dio.offset);
            // Blocks are page-aligned and whole pages; a file system wanting more reads buffered.
            if (dio.memory <= kPage && block_size_ % granule == 0) {
                state->file = std::move(*opened);
                state->direct = true;
                state->granule = granule;
            }
        }
    }
    if (!state->file.is_open()) {
        state->file = File::open_read(path);
    }
    slot = std::move(state);
    return *slot;
}

bool DirectReader::plan_window(std::size_t block) {
    while (plan_range_ < ranges_.size() && ranges_[plan_range_].length == 0) {
        ++plan_range_;
    }
    if (plan_range_ == ranges_.size()) {
        return false;
    }
    const std::uint32_t file = ranges_[plan_range_].file;
    const std::uint64_t granule = input(file).granule;
    Window window;
    window.file = file;
    window.block = block;
    window.begin = round_down(ranges_[plan_range_].offset + plan_offset_, granule);
    const std::uint64_t limit = window.begin + block_size_;
    std::uint64_t covered = window.begin;  // end of the bytes the pieces need
    while (plan_range_ < ranges_.size()) {
        const ReadRange& range = ranges_[plan_range_];
        if (range.length == 0) {
            ++plan_range_;
            continue;
        }
        const std::uint64_t start = range.offset + plan_offset_;
        const std::uint64_t stop = range.offset + range.length;
        // Same file, not behind the window, not past a gap, not past the window's limit.
        if (range.file != file || start < window.begin ||
            round_down(start, granule) > round_up(covered, granule) || start >= limit) {
            break;
        }
        const std::uint64_t piece_end = std::min(stop, limit);
        window.pieces.push_back({plan_range_, plan_offset_,
                                 static_cast<std::size_t>(start - window.begin),
                                 static_cast<std::size_t>(piece_end - start)});
        covered = std::max(covered, piece_end);
        if (piece_end < stop) {
            plan_offset_ += piece_end - start;  // the range goes on in the next window
            break;
        }
        ++plan_range_;
        plan_offset_ = 0;
    }
    window.needed = static_cast<std::size_t>(covered - window.begin);
    window.length = static_cast<std::size_t>(round_up(covered, granule) - window.begin);
    if (input(file).direct) {
        // Units of this window that an earlier one read: copied, not read again.
        const auto unit = static_cast<std::size_t>(granule);
        if (const std::vector<std::byte>* head = cached_unit(file, window.begin)) {
            std::copy(head->begin(), head->end(), blocks_[block].data());
            window.reused_head = window.done = unit;
        }
        const std::uint64_t last = window.begin + window.length - unit;
        if (window.length >= window.reused_head + unit) {
            if (const std::vector<std::byte>* tail = cached_unit(file, last)) {
                std::copy(tail->begin(), tail->end(), blocks_[block].data() + window.length - unit);
                window.reused_tail = unit;
            }
        }
    }
    windows_.push_back(std::move(window));
    if (windows_.back().done >= request_end(windows_.back())) {
        windows_.back().complete = true;  // all from the cache
    } else {
        submit(windows_.back());
    }
    return true;
}

std::size_t DirectReader::request_end(const Window& window) noexcept {
    return std::min(window.needed, window.length - window.reused_tail);
}

const std::vector<std::byte>* DirectReader::cached_unit(std::uint32_t file,
                                                        std::uint64_t offset) const {
    auto found = units_.find({file, offset});
    return found == units_.end() ? nullptr : &found->second;
}

void DirectReader::cache_unit(std::uint32_t file, std::uint64_t offset, const std::byte* bytes,
                              std::size_t length) {
    if (length > unit_budget_ || units_.count({file, offset}) != 0)
        return;
    while (unit_bytes_ + length > unit_budget_ && !unit_order_.empty()) {
        auto oldest = units_.find(unit_order_.front());
        unit_bytes_ -= oldest->second.size();
        units_.erase(oldest);
        unit_order_.pop_front();
    }
    units_.emplace(std::pair{file, offset}, std::vector<std::byte>(bytes, bytes + length));
    unit_order_.emplace_back(file, offset);
    unit_bytes_ += length;
}

void DirectReader::submit(Window& window) {
    InputState& state = *inputs_[window.file];
    // Up to the cached tail unit, if any (the request stays aligned: so is the unit).
    const std::size_t end = std::max(window.length - window.reused_tail, window.done);
    io_->submit({&state.file, IoDirection::kRead, blocks_[window.block].data() + window.done,
                 end - window.done, window.begin + window.done, window.block});
}

DirectReader::Window& DirectReader::window_of_block(std::size_t block) {
    for (Window& window : windows_) {
        if (window.block == block && !window.complete) {
            return window;
        }
    }
    throw_internal_error("DirectReader: a completion for no window");
}

void DirectReader::fail(std::exception_ptr error) {
    if (!error_) {
        error_ = std::move(error);
    }
}

void DirectReader::reap_one() {
    const IoCompletion completion = io_->wait_one();
    Window& window = window_of_block(static_cast<std::size_t>(completion.tag));
    InputState& state = *inputs_[window.file];
    const std::string& path = paths_[window.file];
    const std::int64_t result = completion.result;
    if (result == -EINVAL && state.direct && !state.any_success && !error_) {
        // O_DIRECT taken at open, refused on the read: read this file buffered from now on.
        // The window stays aligned, which a buffered read accepts as it is.
        if (state.file.stop_direct_io()) {
            state.direct = false;
            submit(window);
            return;
        }
    }
    if (result < 0) {
        try {
            throw_io_error(
                "cannot read at offset " + std::to_string(window.begin + window.done) + " of", path,
                static_cast<int>(-result));
        } catch (...) {
            fail(std::current_exception());
        }
        window.complete = true;  // never delivered: next() throws first
        return;
    }
    window.done += static_cast<std::size_t>(result);
    state.any_success = true;
    if (window.done >= request_end(window)) {
        count_bytes_read(window.done - window.reused_head);
        window.complete = true;
        if (state.direct && window.done >= window.length - window.reused_tail) {
            // Its first and last units, when they hold bytes of ranges not read here.
            const auto unit = static_cast<std::size_t>(state.granule);
            const std::byte* data = blocks_[window.block].data();
            const std::size_t first_needed =
                window.pieces.empty() ? 0 : window.pieces.front().offset_in_window;
            if (window.reused_head == 0 && first_needed > 0)
                cache_unit(window.file, window.begin, data, unit);
            if (window.reused_tail == 0 && window.needed % unit != 0)
                cache_unit(window.file, window.begin + window.length - unit,
                           data + window.length - unit, unit);
        }
        return;
    }
    if (result == 0 || error_) {
        if (!error_) {
            try {
                throw_input_error(path, "file is truncated: expected bytes up to offset " +
                                            std::to_string(window.begin + window.needed) +
                                            ", found " + std::to_string(state.file.size()));
            } catch (...) {
                fail(std::current_exception());
            }
        }
        window.complete = true;
        return;
    }
    submit(window);  // a short read before the bytes needed: the rest
}

std::optional<DirectReader::Piece> DirectReader::next() {
    while (true) {
        if (error_) {
            std::rethrow_exception(error_);
        }
        if (front_delivered_) {
            // The caller is done with the previous piece; release its window when exhausted.
            front_delivered_ = false;
            Window& front = windows_.front();
            if (front.next_piece == front.pieces.size()) {
                free_blocks_.push_back(front.block);
                windows_.pop_front();
            }
        }
        // Keep the device busy: every free block gets the next window.
        while (!free_blocks_.empty()) {
            const std::size_t block = free_blocks_.back();
            if (!plan_window(block)) {
                break;
            }
            free_blocks_.pop_back();
        }
        if (windows_.empty()) {
            return std::nullopt;
        }
        Window& front = windows_.front();
        if (!front.complete) {
            reap_one();
            continue;
        }
        const PieceRef& piece = front.pieces[front.next_piece++];
        front_delivered_ = true;
        return Piece{piece.range, piece.offset_in_range,
                     std::span<const std::byte>(
                         blocks_[front.block].data() + piece.offset_in_window, piece.length)};
    }
}

}  // namespace z2f::io
