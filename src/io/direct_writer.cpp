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

}  // namespace

DirectWriter::DirectWriter(const std::string& path, std::uint64_t begin, std::uint64_t end,
                           const DirectWriterOptions& options, std::unique_ptr<AsyncIo> engine)
    : path_(path), begin_(begin), end_(end), next_offset_(begin) {
    if (begin > end || begin % kRangeAlignment != 0) {
        throw_internal_error("DirectWriter: range [" + std::to_string(begin) + ", " +
                             std::to_string(end) + ") of '" + path +
                             "' does not start at a 4096-byte boundary");
    }
    // Blocks: whole pages, at most the budget between them.
    std::size_t block =
        std::max<std::size_t>(options.block_size / kRangeAlignment, 1) * kRangeAlignment;
    std::size_t count =
        std::min(std::max<std::size_t>(options.blocks_in_flight, 1), options.memory_budget / block);
    if (count == 0) {
        block = std::max<std::size_t>(options.memory_budget / kRangeAlignment, 1) * kRangeAlignment;
        count = 1;
    }

    std::uint64_t memory_alignment = kRangeAlignment;
    if (options.direct) {
        if (auto opened = File::try_open_direct(path, DirectOpen::kWrite)) {
            file_ = std::move(*opened);
            direct_ = true;
            DirectIoAlignment dio = file_.direct_io_alignment();
            granule_ = std::max<std::uint64_t>(kRangeAlignment, dio.offset);
            memory_alignment = std::max<std::uint64_t>(kRangeAlignment, dio.memory);
            // A file system that wants more than the plan's 4096 (some parallel file systems
            // report 64 KiB) may not fit this range; then the range goes buffered.
            bool fits = begin % granule_ == 0 && block % granule_ == 0 &&
                        (end % granule_ == 0 || end % kRangeAlignment != 0);
            if (!fits) {
                file_ = File::open_write(path);
                direct_ = false;
                granule_ = kRangeAlignment;
            }
        }
    }
    if (!file_.is_open()) {
        file_ = File::open_write(path);
    }
    if (direct_ && options.preallocate && end > begin) {
        const std::uint64_t reserved_end = round_up(end, granule_);
        if (file_.allocate(begin, reserved_end - begin) && reserved_end > end) {
            needs_truncate_ = true;
        }
    }

    block_size_ = block;
    blocks_.reserve(count);
    for (std::size_t i = 0; i < count; ++i) {
        blocks_.emplace_back(static_cast<std::size_t>(memory_alignment), block, options.huge_pages);
    }
    transfers_.resize(count);
    for (std::size_t i = count; i > 0; --i) {
        free_blocks_.push_back(i - 1);
    }
    // Buffered writes go to the thread engine whatever was asked (see fall_back_to_buffered).
    io_ = engine ? std::move(engine)
                 : make_async_io(direct_ ? options.engine : IoEngine::kThreads, count);
    if (io_->depth() < count) {
        throw_internal_error("DirectWriter: engine shallower than the blocks");
    }
}

DirectWriter::~DirectWriter() {
    // The engine's destructor waits for what the kernel has; nothing new is submitted.
    io_.reset();
}

std::size_t DirectWriter::current_length() const noexcept {
    return static_cast<std::size_t>(std::min<std::uint64_t>(block_size_, end_ - next_offset_));
}

std::span<std::byte> DirectWriter::buffer() {
    throw_if_failed();
    if (begin_ + committed_ == end_) {
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
    if (current_ == kNoBlock || fill_ + bytes > current_length()) {
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
            throw_internal_error("DirectWriter: append past the end of the range of '" + path_ +
                                 "'");
        }
        std::size_t piece = std::min(space.size(), data.size());
        std::memcpy(space.data(), data.data(), piece);
        commit(piece);
        data = data.subspan(piece);
    }
}

void DirectWriter::submit_current() {
    const std::size_t block = current_;
    current_ = kNoBlock;
    Transfer transfer{next_offset_, fill_, 0, fill_};
    if (direct_ && fill_ % granule_ != 0) {
        // Only the range's (and so the file's) last block can be unaligned: pad it with zeros
        // up to the alignment; finish() cuts the file back to `end`.
        transfer.length = static_cast<std::size_t>(round_up(fill_, granule_));
        std::memset(blocks_[block].data() + fill_, 0, transfer.length - fill_);
        needs_truncate_ = true;
    }
    next_offset_ += fill_;
    fill_ = 0;
    transfers_[block] = transfer;
    submit(block);
}

void DirectWriter::submit(std::size_t block) {
    const Transfer& transfer = *transfers_[block];
    io_->submit({&file_, IoDirection::kWrite, blocks_[block].data() + transfer.done,
                 transfer.length - transfer.done, transfer.offset + transfer.done, block});
}

void DirectWriter::reap_one() {
    const IoCompletion completion = io_->wait_one();
    const auto block = static_cast<std::size_t>(completion.tag);
    if (completion.result == -EINVAL && direct_ && !any_direct_success_ && error_ == 0) {
        // O_DIRECT taken at open, refused on the transfer: every direct write of this file
        // fails alike, so the file goes buffered and this block is sent again.
        fall_back_to_buffered(block);
        return;
    }
    complete(block, completion.result);
}

void DirectWriter::complete(std::size_t block, std::int64_t result) {
    Transfer& transfer = *transfers_[block];
    if (result > 0 && error_ == 0) {
        transfer.done += static_cast<std::size_t>(result);
        if (transfer.done < transfer.length) {
            submit(block);  // a short write: the rest (a second refusal then names the cause)
            return;
        }
        any_direct_success_ = any_direct_success_ || direct_;
        count_bytes_written(transfer.real_length);
    } else if (result <= 0) {
        // 0 bytes written with bytes to write: the device took nothing and said nothing.
        record_error(result == 0 ? EIO : static_cast<int>(-result),
                     transfer.offset + transfer.done);
    }
    transfers_[block].reset();
    free_blocks_.push_back(block);
}

void DirectWriter::fall_back_to_buffered(std::size_t refused) {
    if (!file_.stop_direct_io()) {
        complete(refused, -EINVAL);
        return;
    }
    direct_ = false;
    // The other blocks in flight were sent for direct I/O too: collect them all, then resend
    // the refused ones at their real length (no padding: a buffered write takes any length).
    std::vector<std::size_t> resend = {refused};
    while (io_->in_flight() > 0) {
        const IoCompletion completion = io_->wait_one();
        const auto block = static_cast<std::size_t>(completion.tag);
        if (completion.result == -EINVAL) {
            resend.push_back(block);
        } else {
            complete(block, completion.result);
        }
    }
    // Buffered writes through io_uring go to its kernel workers, which run the writes of one
    // file one after the other: 7x slower than the thread engine here (docs/io-engine.md).
    if (io_->engine() == IoEngine::kIoUring) {
        io_ = make_async_io(IoEngine::kThreads, blocks_.size());
    }
    for (std::size_t block : resend) {
        if (error_ != 0) {
            complete(block, -EINVAL);  // released, the first error stands
            continue;
        }
        Transfer& transfer = *transfers_[block];
        transfer.length = transfer.real_length;
        transfer.done = 0;
        submit(block);
    }
}

void DirectWriter::record_error(int errnum, std::uint64_t offset) {
    if (error_ == 0) {
        error_ = errnum;
        error_offset_ = offset;
    }
}

void DirectWriter::throw_if_failed() const {
    if (error_ != 0) {
        throw_io_error("cannot write at offset " + std::to_string(error_offset_) + " of", path_,
                       error_);
    }
}

void DirectWriter::finish() {
    if (finished_) {
        return;
    }
    throw_if_failed();
    if (begin_ + committed_ != end_) {
        throw_internal_error("DirectWriter: finish() of '" + path_ + "' with " +
                             std::to_string(end_ - begin_ - committed_) + " bytes missing");
    }
    // Every transfer is waited for, even after an error: the first error is the one reported,
    // and no buffer is given back while the kernel may still use it.
    while (io_->in_flight() > 0) {
        reap_one();
    }
    throw_if_failed();
    if (needs_truncate_) {
        file_.truncate(end_);
    }
    file_.sync_data();
    file_.close();
    finished_ = true;
}

}  // namespace z2f::io
