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
    : paths_(std::move(paths)) {
    check_files(ranges);
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
            sampled_fraction_ = sample_cached_fraction(paths_, ranges, options.warm_samples);
            direct_ = sampled_fraction_ < options.warm_threshold;
            break;
    }

    ranges_.assign(ranges.begin(), ranges.end());
    inputs_.resize(paths_.size());
    blocks_.reserve(count);
    for (std::size_t i = 0; i < count; ++i) {
        blocks_.emplace_back(kPage, block, options.huge_pages);
    }
    for (std::size_t i = count; i > 0; --i) {
        free_blocks_.push_back(i - 1);
    }
    block_windows_.assign(count, 0);
    io_ =
        engine ? std::move(engine) : make_async_io(options.engine, std::max(count, kGroupWindows));
    if (io_->depth() < count) {
        throw_internal_error("DirectReader: engine shallower than the blocks");
    }
}

void DirectReader::check_files(std::span<const ReadRange> ranges) const {
    for (const ReadRange& range : ranges) {
        if (range.file >= paths_.size()) {
            throw_internal_error("DirectReader: a range names file " + std::to_string(range.file) +
                                 " of " + std::to_string(paths_.size()));
        }
    }
}

void DirectReader::extend(std::span<const ReadRange> ranges) {
    check_files(ranges);
    // The ranges behind the planning cursor are in windows already, or delivered.
    while (range_base_ < plan_range_) {
        ranges_.pop_front();
        ++range_base_;
    }
    ranges_.insert(ranges_.end(), ranges.begin(), ranges.end());
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

std::size_t DirectReader::interleaved_files(std::uint64_t bytes, std::size_t limit) const {
    // A bounded look: a group never needs more ranges than this to fill its slots.
    constexpr std::size_t kLookAhead = 1 << 16;
    std::vector<std::uint32_t> files;
    std::uint64_t seen = 0;
    for (std::size_t r = plan_range_; r < range_end() && r - plan_range_ < kLookAhead; ++r) {
        const ReadRange& range = range_at(r);
        if (range.length == 0)
            continue;
        if (std::find(files.begin(), files.end(), range.file) == files.end()) {
            if (files.size() == limit)
                break;
            files.push_back(range.file);
        }
        seen += range.length - (r == plan_range_ ? plan_offset_ : 0);
        if (seen >= bytes)
            break;
    }
    return std::max<std::size_t>(files.size(), 1);
}

bool DirectReader::plan_group() {
    while (plan_range_ < range_end() && range_at(plan_range_).length == 0) {
        ++plan_range_;
    }
    if (plan_range_ == range_end() || free_blocks_.empty() || incomplete_ >= io_->depth()) {
        return false;
    }
    // Slots: the free blocks cut into as many equal parts (whole pages) as files interleave.
    const std::size_t depth_left = io_->depth() - incomplete_;
    const std::size_t files = interleaved_files(
        std::uint64_t{free_blocks_.size()} * block_size_,
        std::min(depth_left, free_blocks_.size() * static_cast<std::size_t>(block_size_ / kPage)));
    std::size_t per_block = (files + free_blocks_.size() - 1) / free_blocks_.size();
    std::size_t slot_size = static_cast<std::size_t>(round_down(block_size_ / per_block, kPage));
    if (round_down(slot_size, input(range_at(plan_range_).file).granule) == 0) {
        per_block = 1;  // the first file's alignment is coarser than a slot: a whole block
        slot_size = block_size_;
    }
    const std::size_t slots = std::min(files, per_block * free_blocks_.size());

    struct Open {
        std::uint64_t limit = 0;    // end of the window's capacity in the file
        std::uint64_t covered = 0;  // end of the bytes its pieces need
        std::uint64_t granule = 1;
    };
    std::vector<Window> group;
    std::vector<Open> open;
    while (plan_range_ < range_end()) {
        const ReadRange& range = range_at(plan_range_);
        if (range.length == 0) {
            ++plan_range_;
            continue;
        }
        const std::uint64_t start = range.offset + plan_offset_;
        const std::uint64_t stop = range.offset + range.length;
        std::size_t w = 0;
        while (w < group.size() && group[w].file != range.file) {
            ++w;
        }
        if (w == group.size()) {
            // The file's first range in this group: a window in the next slot, if one is
            // left and holds at least one of the file's alignment units.
            const std::uint64_t granule = input(range.file).granule;
            const std::uint64_t capacity = round_down(slot_size, granule);
            if (group.size() == slots || capacity == 0) {
                break;
            }
            Window window;
            window.file = range.file;
            window.begin = round_down(start, granule);
            window.block = free_blocks_[free_blocks_.size() - 1 - group.size() / per_block];
            window.block_offset = group.size() % per_block * slot_size;
            group.push_back(std::move(window));
            open.push_back({group.back().begin + capacity, group.back().begin, granule});
        }
        Window& window = group[w];
        Open& at = open[w];
        // Not behind the window, not past a gap, not past its capacity.
        if (start < window.begin ||
            round_down(start, at.granule) > round_up(at.covered, at.granule) || start >= at.limit) {
            break;
        }
        const std::uint64_t piece_end = std::min(stop, at.limit);
        window.pieces.push_back({plan_range_, plan_offset_,
                                 static_cast<std::size_t>(start - window.begin),
                                 static_cast<std::size_t>(piece_end - start)});
        at.covered = std::max(at.covered, piece_end);
        if (piece_end < stop) {
            plan_offset_ += piece_end - start;  // the range goes on in a later window
            break;
        }
        ++plan_range_;
        plan_offset_ = 0;
    }
    if (group.empty()) {
        throw_internal_error("DirectReader: a group planned no window");
    }
    const std::size_t blocks_used = (group.size() + per_block - 1) / per_block;
    for (std::size_t w = 0; w < group.size(); ++w) {
        Window& window = group[w];
        window.id = next_id_++;
        window.needed = static_cast<std::size_t>(open[w].covered - window.begin);
        window.length =
            static_cast<std::size_t>(round_up(open[w].covered, open[w].granule) - window.begin);
        ++block_windows_[window.block];
        windows_.push_back(std::move(window));
        start(windows_.back());
    }
    free_blocks_.resize(free_blocks_.size() - blocks_used);
    return true;
}

std::byte* DirectReader::data(const Window& window) noexcept {
    return blocks_[window.block].data() + window.block_offset;
}

void DirectReader::start(Window& window) {
    const std::uint32_t file = window.file;
    if (input(file).direct) {
        // An earlier window of this file still reading the unit this one starts in (groups
        // keep several windows of a file in flight): its completion caches the unit.
        while (true) {
            const auto reading =
                std::find_if(windows_.begin(), windows_.end(), [&](const Window& w) {
                    return w.id != window.id && !w.complete && w.file == file &&
                           w.begin <= window.begin && window.begin < w.begin + w.length;
                });
            if (reading == windows_.end())
                break;
            reap_one();
        }
        // Units of this window that an earlier one read: copied, not read again.
        const auto unit = static_cast<std::size_t>(input(file).granule);
        if (const std::vector<std::byte>* head = cached_unit(file, window.begin)) {
            std::copy(head->begin(), head->end(), data(window));
            window.reused_head = window.done = unit;
        }
        const std::uint64_t last = window.begin + window.length - unit;
        if (window.length >= window.reused_head + unit) {
            if (const std::vector<std::byte>* tail = cached_unit(file, last)) {
                std::copy(tail->begin(), tail->end(), data(window) + window.length - unit);
                window.reused_tail = unit;
            }
        }
    }
    if (window.done >= request_end(window)) {
        window.complete = true;  // all from the cache
    } else {
        ++incomplete_;
        submit(window);
    }
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
    io_->submit({&state.file, IoDirection::kRead, data(window) + window.done, end - window.done,
                 window.begin + window.done, window.id});
}

DirectReader::Window& DirectReader::window_of_id(std::uint64_t id) {
    for (Window& window : windows_) {
        if (window.id == id && !window.complete) {
            return window;
        }
    }
    throw_internal_error("DirectReader: a completion for no window");
}

std::list<DirectReader::Window>::iterator DirectReader::next_window() {
    auto best = windows_.begin();
    for (auto it = std::next(windows_.begin()); it != windows_.end(); ++it) {
        const PieceRef& piece = it->pieces[it->next_piece];
        const PieceRef& front = best->pieces[best->next_piece];
        if (piece.range < front.range ||
            (piece.range == front.range && piece.offset_in_range < front.offset_in_range)) {
            best = it;
        }
    }
    return best;
}

void DirectReader::fail(std::exception_ptr error) {
    if (!error_) {
        error_ = std::move(error);
    }
}

void DirectReader::reap_one() {
    const std::uint64_t waiting_since = monotonic_ns();
    const IoCompletion completion = io_->wait_one();
    count_read_wait(monotonic_ns() - waiting_since);
    Window& window = window_of_id(completion.tag);
    --incomplete_;  // until submitted again below
    InputState& state = *inputs_[window.file];
    const std::string& path = paths_[window.file];
    std::int64_t result = completion.result;
    if (result == -EINVAL && state.direct && !state.any_success && !error_) {
        // O_DIRECT taken at open, refused on the read: read this file buffered from now on.
        // The window stays aligned, which a buffered read accepts as it is.
        if (state.file.stop_direct_io()) {
            state.direct = false;
            ++incomplete_;
            submit(window);
            return;
        }
    }
    if ((result == -EINTR || result == -EAGAIN) && !error_) {
        ++incomplete_;
        submit(window);  // transient: the same request again
        return;
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
    const std::size_t request_start = window.done;
    window.done += static_cast<std::size_t>(result);
    state.any_success = true;
    if (window.done >= request_end(window)) {
        count_bytes_read(window.done - window.reused_head);
        window.complete = true;
        if (state.direct && window.done >= window.length - window.reused_tail) {
            // Its first and last units, when they hold bytes of ranges not read here.
            const auto unit = static_cast<std::size_t>(state.granule);
            const std::byte* bytes = data(window);
            const std::size_t first_needed =
                window.pieces.empty() ? 0 : window.pieces.front().offset_in_window;
            if (window.reused_head == 0 && first_needed > 0)
                cache_unit(window.file, window.begin, bytes, unit);
            if (window.reused_tail == 0 && window.needed % unit != 0)
                cache_unit(window.file, window.begin + window.length - unit,
                           bytes + window.length - unit, unit);
        }
        return;
    }
    if (state.direct && window.done % state.granule != 0) {
        // O_DIRECT reads start at aligned offsets only: the rest is read again from the unit
        // the short read ended in. A short read that does not get past that unit's start
        // ended at the end of the file.
        const std::size_t aligned = window.done / state.granule * state.granule;
        window.done = aligned > request_start ? aligned : request_start;
        if (aligned <= request_start)
            result = 0;
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
    ++incomplete_;
    submit(window);  // a short read before the bytes needed: the rest
}

std::optional<DirectReader::Piece> DirectReader::next() {
    while (true) {
        if (error_) {
            std::rethrow_exception(error_);
        }
        if (delivered_) {
            // The caller is done with the previous piece; release its window when exhausted,
            // and its block with its last window.
            const auto window = *delivered_;
            delivered_.reset();
            if (window->next_piece == window->pieces.size()) {
                if (--block_windows_[window->block] == 0) {
                    free_blocks_.push_back(window->block);
                }
                windows_.erase(window);
            }
        }
        // Keep the device busy: free blocks get the next groups.
        while (plan_group()) {
        }
        if (windows_.empty()) {
            return std::nullopt;
        }
        const auto window = next_window();
        if (!window->complete) {
            reap_one();
            continue;
        }
        const PieceRef& piece = window->pieces[window->next_piece++];
        delivered_ = window;
        return Piece{
            piece.range, piece.offset_in_range,
            std::span<const std::byte>(data(*window) + piece.offset_in_window, piece.length)};
    }
}

}  // namespace z2f::io
