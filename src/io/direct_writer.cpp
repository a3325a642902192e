#include "io/direct_writer.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "common/errors.hpp"

namespace z2f::io {
namespace {

constexpr std::uint64_t round_up(std::uint64_t value, std::uint64_t alignment) {
    return (value + alignment - 1) / alignment * alignment;
}

// Blocks of 2 MiB and more sit in huge pages, aligned to 2 MiB (aligned_buffer.hpp).
constexpr std::size_t kHugePage = std::size_t{2} << 20;

}  // namespace

DirectWriter::DirectWriter(const DirectWriterOptions& options, std::unique_ptr<AsyncIo> engine)
    : options_(options) {
    // Blocks: whole pages, at most the budget between them.
    // Comparing needs a second block per block, for the file's bytes: the same budget holds
    // half as many.
    const std::size_t budget = options.compare ? options.memory_budget / 2 : options.memory_budget;
    std::size_t block =
        std::max<std::size_t>(options.block_size / kRangeAlignment, 1) * kRangeAlignment;
    std::size_t count =
        std::min(std::max<std::size_t>(options.blocks_in_flight, 1), budget / block);
    if (count == 0) {
        block = std::max<std::size_t>(budget / kRangeAlignment, 1) * kRangeAlignment;
        count = 1;
    }
    block_size_ = block;
    memory_alignment_ = options.huge_pages && block >= kHugePage ? kHugePage : kRangeAlignment;
    blocks_.reserve(count);
    for (std::size_t i = 0; i < count; ++i) {
        blocks_.emplace_back(kRangeAlignment, block, options.huge_pages);
        if (options.compare)
            file_blocks_.emplace_back(kRangeAlignment, block, options.huge_pages);
    }
    transfers_.resize(count);
    for (std::size_t i = count; i > 0; --i) {
        free_blocks_.push_back(i - 1);
    }
    // Buffered writes go to the thread engine whatever was asked (see the header).
    injected_engine_ = engine != nullptr;
    io_ = engine ? std::move(engine)
                 : make_async_io(options.direct ? options.engine : IoEngine::kThreads,
                                 count + options.sync_slots);
    if (io_->depth() < count) {
        throw_internal_error("DirectWriter: engine shallower than the blocks");
    }
    sync_slots_.assign(io_->depth() - count, nullptr);
}

DirectWriter::DirectWriter(const std::string& path, std::uint64_t begin, std::uint64_t end,
                           const DirectWriterOptions& options, std::unique_ptr<AsyncIo> engine)
    : DirectWriter(options, std::move(engine)) {
    open(path, begin, end,
         end % kRangeAlignment != 0 ? std::optional<std::uint64_t>(end) : std::nullopt);
}

DirectWriter::~DirectWriter() {
    // The engine's destructor waits for what the kernel has; nothing new is submitted.
    io_.reset();
}

void DirectWriter::open(const std::string& path, std::uint64_t begin, std::uint64_t end,
                        std::optional<std::uint64_t> final_size, std::uint64_t tag) {
    throw_if_failed();
    if (current_range_ != nullptr) {
        throw_internal_error("DirectWriter: '" + path + "' opened before '" + current_range_->path +
                             "' was closed");
    }
    if (begin > end || begin % kRangeAlignment != 0) {
        throw_internal_error("DirectWriter: range [" + std::to_string(begin) + ", " +
                             std::to_string(end) + ") of '" + path +
                             "' does not start at a 4096-byte boundary");
    }
    while (ranges_.size() >= std::max<std::size_t>(options_.max_open_ranges, 1) &&
           io_->in_flight() > 0) {
        reap_one();
    }
    throw_if_failed();

    auto range = std::make_unique<Range>();
    range->path = path;
    range->begin = begin;
    range->end = end;
    range->final_size = final_size;
    range->tag = tag;
    const DirectOpen how = options_.compare ? DirectOpen::kRead : DirectOpen::kWrite;
    if (options_.direct) {
        if (auto opened = File::try_open_direct(path, how)) {
            range->file = std::move(*opened);
            range->direct = true;
            DirectIoAlignment dio = range->file.direct_io_alignment();
            range->granule = std::max<std::uint64_t>(kRangeAlignment, dio.offset);
            // A file system that wants more than the plan's 4096 (some parallel file systems
            // report 64 KiB), or more memory alignment than the blocks have, may not fit this
            // range; then the range goes buffered.
            const bool fits = begin % range->granule == 0 && block_size_ % range->granule == 0 &&
                              dio.memory <= memory_alignment_ &&
                              (end % range->granule == 0 || end % kRangeAlignment != 0);
            if (!fits) {
                range->file = options_.compare ? File::open_read(path) : File::open_write(path);
                range->direct = false;
                range->granule = kRangeAlignment;
            }
        }
    }
    if (!range->file.is_open()) {
        range->file = options_.compare ? File::open_read(path) : File::open_write(path);
    }
    if (!range->direct && !injected_engine_ && io_->engine() == IoEngine::kIoUring &&
        io_->in_flight() == 0) {
        // Buffered writes of one file through io_uring run one at a time in its kernel workers
        // (7x slower here, docs/io-engine.md): a file system that refuses O_DIRECT at open
        // gets the thread engine from here on.
        io_ = make_async_io(IoEngine::kThreads, io_->depth());
    }
    if (range->direct && options_.preallocate && !options_.compare && end > begin) {
        const std::uint64_t reserved_end = round_up(end, range->granule);
        if (range->file.allocate(begin, reserved_end - begin) && reserved_end > end) {
            range->needs_truncate = true;
        }
    }
    current_range_ = range.get();
    last_range_ = range.get();
    ranges_.push_back(std::move(range));
    committed_ = 0;
    current_ = kNoBlock;
    fill_ = 0;
    next_offset_ = begin;
}

bool DirectWriter::direct() const noexcept {
    if (current_range_ != nullptr)
        return current_range_->direct;
    return last_range_ != nullptr ? last_range_->direct : last_direct_;
}

std::uint64_t DirectWriter::alignment() const noexcept {
    if (current_range_ != nullptr)
        return current_range_->granule;
    return last_range_ != nullptr ? last_range_->granule : last_granule_;
}

std::size_t DirectWriter::current_length() const noexcept {
    return static_cast<std::size_t>(
        std::min<std::uint64_t>(block_size_, current_range_->end - next_offset_));
}

std::span<std::byte> DirectWriter::buffer() {
    throw_if_failed();
    if (current_range_ == nullptr) {
        throw_internal_error("DirectWriter: buffer() with no range open");
    }
    if (current_range_->begin + committed_ == current_range_->end) {
        return {};
    }
    if (current_ == kNoBlock) {
        while (free_blocks_.empty()) {
            reap_one();
            throw_if_failed();
        }
        current_ = free_blocks_.back();
        free_blocks_.pop_back();
        fill_ = 0;
    }
    return blocks_[current_].span().subspan(fill_, current_length() - fill_);
}

void DirectWriter::commit(std::size_t bytes) {
    throw_if_failed();
    if (bytes == 0) {
        return;
    }
    if (current_range_ == nullptr || current_ == kNoBlock || fill_ + bytes > current_length()) {
        throw_internal_error("DirectWriter: commit of more than buffer() gave");
    }
    fill_ += bytes;
    committed_ += bytes;
    if (fill_ == current_length()) {
        submit_current();
    }
}

void DirectWriter::append(std::span<const std::byte> data) {
    while (!data.empty()) {
        std::span<std::byte> space = buffer();
        if (space.empty()) {
            throw_internal_error("DirectWriter: append past the end of the range of '" +
                                 current_range_->path + "'");
        }
        std::size_t piece = std::min(space.size(), data.size());
        std::memcpy(space.data(), data.data(), piece);
        commit(piece);
        data = data.subspan(piece);
    }
}

void DirectWriter::submit_current() {
    Range& range = *current_range_;
    const std::size_t block = current_;
    current_ = kNoBlock;
    Transfer transfer{&range, next_offset_, fill_, 0, fill_, range.direct};
    if (range.direct && fill_ % range.granule != 0) {
        // Only the range's (and so the file's) last block can be unaligned: pad it with zeros
        // up to the alignment; the size is set back to `end` once the range is written.
        transfer.length = static_cast<std::size_t>(round_up(fill_, range.granule));
        std::memset(blocks_[block].data() + fill_, 0, transfer.length - fill_);
        range.needs_truncate = true;
    }
    next_offset_ += fill_;
    fill_ = 0;
    transfers_[block] = transfer;
    ++range.blocks_in_flight;
    submit(block);
}

void DirectWriter::submit(std::size_t block) {
    const Transfer& transfer = *transfers_[block];
    if (options_.compare) {
        io_->submit({&transfer.range->file, IoDirection::kRead,
                     file_blocks_[block].data() + transfer.done, transfer.length - transfer.done,
                     transfer.offset + transfer.done, block});
        return;
    }
    io_->submit({&transfer.range->file, IoDirection::kWrite, blocks_[block].data() + transfer.done,
                 transfer.length - transfer.done, transfer.offset + transfer.done, block});
}

void DirectWriter::reap_one() {
    const std::uint64_t waiting_since = monotonic_ns();
    const IoCompletion completion = io_->wait_one();
    count_write_wait(monotonic_ns() - waiting_since);
    handle(completion);
}

void DirectWriter::handle(const IoCompletion& completion) {
    if (completion.tag < blocks_.size()) {
        complete(static_cast<std::size_t>(completion.tag), completion.result);
        return;
    }
    const auto slot = static_cast<std::size_t>(completion.tag - blocks_.size());
    Range* range = sync_slots_.at(slot);
    sync_slots_[slot] = nullptr;
    synced(*range, completion.result);
    if (!sync_queue_.empty()) {
        Range* next = sync_queue_.front();
        sync_queue_.pop_front();
        start_sync(*next);
    }
}

void DirectWriter::complete(std::size_t block, std::int64_t result) {
    Transfer& transfer = *transfers_[block];
    Range& range = *transfer.range;
    if (result == -EINVAL && transfer.sent_direct && !range.any_direct_success && !range.failed) {
        // O_DIRECT taken at open, refused on the transfer: every direct write of this file
        // fails alike, so the file goes buffered and this block is sent again, unpadded (a
        // buffered write takes any length). Blocks of the file still in flight come back
        // refused too and take the same road.
        if (!range.fell_back) {
            range.fell_back = range.file.stop_direct_io();
            range.direct = !range.fell_back;
        }
        if (range.fell_back) {
            transfer.length = transfer.real_length;
            transfer.done = 0;
            transfer.sent_direct = false;
            submit(block);
            return;
        }
    }
    if ((result == -EINTR || result == -EAGAIN) && !range.failed) {
        submit(block);  // transient: the same request again
        return;
    }
    const bool ends_early =  // an O_DIRECT read ends mid-unit only at the end of the file
        result > 0 && transfer.sent_direct &&
        (transfer.done + static_cast<std::size_t>(result)) % range.granule != 0 &&
        transfer.done + static_cast<std::size_t>(result) < transfer.real_length;
    if (options_.compare && (result == 0 || ends_early) && !range.failed) {
        // The file ends before the block's data does: everything from there on differs.
        const std::size_t found = transfer.done + static_cast<std::size_t>(result);
        compared(block, found);
        note_mismatch(range.tag, transfer.offset + found, transfer.offset + transfer.real_length);
    } else if (result > 0 && !range.failed) {
        const std::size_t request_start = transfer.done;
        transfer.done += static_cast<std::size_t>(result);
        // A read may end at the end of the file inside the padding of the last block.
        if (options_.compare && transfer.done >= transfer.real_length)
            transfer.done = transfer.length;
        if (transfer.done < transfer.length) {
            // A short write: the rest. O_DIRECT writes start at aligned offsets only, so the
            // rest starts at the unit the short write ended in (its bytes are still in the
            // block); a short write that does not get past that unit's start is stuck.
            if (transfer.sent_direct && transfer.done % range.granule != 0) {
                const std::size_t aligned = transfer.done / range.granule * range.granule;
                transfer.done = std::max(aligned, request_start);
                if (aligned <= request_start && ++transfer.stalls > kMaxStalls) {
                    fail_range(range, EIO, transfer.offset + transfer.done, nullptr);
                    result = -EIO;
                }
            }
            if (result > 0) {
                submit(block);
                return;
            }
        } else {
            range.any_direct_success = range.any_direct_success || transfer.sent_direct;
            if (options_.compare) {
                compared(block, transfer.real_length);
            } else {
                count_bytes_written(transfer.real_length);
                if (!transfer.sent_direct) {
                    // Buffered: push the block towards the disk now, so that the page cache
                    // holds clean (reclaimable) pages, not a file's worth of dirty ones.
                    range.file.start_writeback(transfer.offset, transfer.real_length);
                }
            }
        }
    } else if (result <= 0 && !range.failed) {
        // 0 bytes written with bytes to write: the device took nothing and said nothing.
        fail_range(range, result == 0 ? EIO : static_cast<int>(-result),
                   transfer.offset + transfer.done, nullptr);
    }
    // A block of a range that failed earlier is dropped as it comes back: that range is never
    // reported durable (see fail_range).
    transfers_[block].reset();
    free_blocks_.push_back(block);
    --range.blocks_in_flight;
    if (range.closed && range.blocks_in_flight == 0) {
        written(range);
    }
}

void DirectWriter::written(Range& range) {
    if (range.failed) {
        release(range);  // not durable, never reported: its file stays under its temp name
        return;
    }
    if (options_.compare) {
        durable_.push_back(range.tag);  // compared: nothing to size or sync
        release(range);
        return;
    }
    // Even after an error elsewhere: a range whose every byte is written still gets its size
    // and its sync, so that settle() can report it (a rank that fails on one file keeps the
    // files it finished, for --resume). The size is set with the sync, off this thread.
    if (range.final_size) {
        range.size_to_set = range.final_size;
    } else if (range.needs_truncate) {
        range.size_to_set = range.end;
    }
    start_sync(range);
}

void DirectWriter::start_sync(Range& range) {
    range.sync_sent = true;
    auto free_slot = std::find(sync_slots_.begin(), sync_slots_.end(), nullptr);
    if (sync_slots_.empty()) {  // an engine without room: here
        const std::uint64_t waiting_since = monotonic_ns();
        std::int64_t result = range.size_to_set ? range.file.truncate_once(*range.size_to_set) : 0;
        if (result == 0)
            result = range.file.sync_data_once();
        count_write_wait(monotonic_ns() - waiting_since);
        synced(range, result);
        return;
    }
    if (free_slot == sync_slots_.end()) {
        sync_queue_.push_back(&range);
        return;
    }
    *free_slot = &range;
    const auto slot = static_cast<std::uint64_t>(free_slot - sync_slots_.begin());
    if (range.size_to_set) {
        io_->submit({&range.file, IoDirection::kSizeAndSync, nullptr, 0, *range.size_to_set,
                     blocks_.size() + slot});
    } else {
        io_->submit({&range.file, IoDirection::kSyncData, nullptr, 0, 0, blocks_.size() + slot});
    }
}

void DirectWriter::synced(Range& range, std::int64_t result) {
    if (result == -EINTR || result == -EAGAIN) {
        start_sync(range);  // transient: the size and the sync again
        return;
    }
    if (result < 0) {
        fail_range(range, static_cast<int>(-result), 0,
                   range.size_to_set ? "cannot set the size of or sync" : "cannot sync");
    } else {
        // Durable only once the descriptor is closed without an error too (a network file
        // system may report a failed write-back only there).
        try {
            if (!range.direct)
                range.file.drop_cache(range.begin, range.end - range.begin);
            range.file.close();
            durable_.push_back(range.tag);
        } catch (...) {
            range.failed = true;
            if (!error_)
                error_ = std::current_exception();
        }
    }
    release(range);
}

void DirectWriter::release(Range& range) {
    try {
        range.file.close();
    } catch (...) {
        // A range that failed already, or whose close failed above: its error is recorded.
    }
    if (last_range_ == &range) {
        last_direct_ = range.direct;
        last_granule_ = range.granule;
        last_range_ = nullptr;
    }
    auto it = std::find_if(ranges_.begin(), ranges_.end(),
                           [&](const std::unique_ptr<Range>& r) { return r.get() == &range; });
    if (it != ranges_.end())
        ranges_.erase(it);
}

void DirectWriter::compared(std::size_t block, std::size_t length) {
    const Transfer& transfer = *transfers_[block];
    const std::byte* expected = blocks_[block].data();
    const std::byte* found = file_blocks_[block].data();
    length = std::min(length, transfer.real_length);
    count_bytes_read(length);
    if (std::memcmp(expected, found, length) == 0)
        return;
    // The differing runs of the block, at most kMaxRunsPerBlock; the last then reaches the
    // block's end. Only a failed comparison pays for the byte-by-byte walk.
    std::size_t runs = 0;
    for (std::size_t at = 0; at < length;) {
        if (expected[at] == found[at]) {
            ++at;
            continue;
        }
        std::size_t end = at + 1;
        while (end < length && expected[end] != found[end])
            ++end;
        if (++runs == kMaxRunsPerBlock)
            end = length;
        note_mismatch(transfer.range->tag, transfer.offset + at, transfer.offset + end);
        at = end;
    }
}

void DirectWriter::note_mismatch(std::uint64_t tag, std::uint64_t begin, std::uint64_t end) {
    if (end > begin)
        mismatches_.push_back({tag, begin, end});
}

std::vector<DirectWriter::Mismatch> DirectWriter::take_mismatches() {
    std::vector<Mismatch> mismatches;
    mismatches.swap(mismatches_);
    return mismatches;
}

void DirectWriter::fail_range(Range& range, int errnum, std::uint64_t offset, const char* step) {
    range.failed = true;
    record_error(errnum, range.path, offset, step);
}

void DirectWriter::record_error(int errnum, const std::string& path, std::uint64_t offset,
                                const char* step) {
    if (error_)
        return;
    try {
        if (step != nullptr)
            throw_io_error(step, path, errnum);
        throw_io_error(std::string(options_.compare ? "cannot read" : "cannot write") +
                           " at offset " + std::to_string(offset) + " of",
                       path, errnum);
    } catch (...) {
        error_ = std::current_exception();
    }
}

void DirectWriter::throw_if_failed() const {
    if (error_) {
        std::rethrow_exception(error_);
    }
}

void DirectWriter::close_range() {
    throw_if_failed();
    if (current_range_ == nullptr) {
        throw_internal_error("DirectWriter: close_range() with no range open");
    }
    Range& range = *current_range_;
    if (range.begin + committed_ != range.end) {
        throw_internal_error("DirectWriter: '" + range.path + "' closed with " +
                             std::to_string(range.end - range.begin - committed_) +
                             " bytes missing");
    }
    if (current_ != kNoBlock) {
        // A block taken by buffer() but given no byte (the range was already full).
        free_blocks_.push_back(current_);
        current_ = kNoBlock;
    }
    range.closed = true;
    current_range_ = nullptr;
    if (range.blocks_in_flight == 0) {
        written(range);
    }
    throw_if_failed();
}

std::vector<std::uint64_t> DirectWriter::take_durable() {
    while (io_->in_flight() > 0) {
        std::optional<IoCompletion> completion = io_->poll_one();
        if (!completion)
            break;
        handle(*completion);
    }
    throw_if_failed();
    std::vector<std::uint64_t> durable;
    durable.swap(durable_);
    return durable;
}

std::vector<std::uint64_t> DirectWriter::settle() noexcept {
    try {
        while (io_->in_flight() > 0) {
            reap_one();
        }
    } catch (...) {
        // A broken engine: what it still has is waited for by its destructor.
    }
    std::vector<std::uint64_t> durable;
    durable.swap(durable_);
    return durable;
}

void DirectWriter::drain() {
    // Every transfer is waited for, even after an error: the first error is the one reported,
    // and no buffer is given back while the kernel may still use it.
    while (io_->in_flight() > 0) {
        reap_one();
    }
    throw_if_failed();
}

void DirectWriter::finish() {
    if (current_range_ != nullptr) {
        close_range();
    }
    drain();
}

}  // namespace z2f::io
