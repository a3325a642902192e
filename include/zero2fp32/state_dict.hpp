// A checkpoint's consolidated tensors read into memory that the caller owns, in this process:
// the state dict itself instead of files (what the Python package hands to torch).
//
//   z2f::StateDictReader reader("/ckpt/checkpoint-500", z2f::Options{});
//   for (std::size_t i = 0; i < reader.plan().tensors.size(); ++i) ... allocate tensor i
//   reader.read(destinations);   // every tensor's bytes, read by several threads
//
// The tensors are those z2f::convert would write with the same options (names, order, output
// dtypes, shapes, values); the options that only shape files (format, shard size, the output
// directory's) are not used. The reads go through the same engine as a conversion: buffered
// reads straight into the destinations when the page cache holds the checkpoint, O_DIRECT read
// ahead when it does not, dtype conversion on the way, and every input record the tensors come
// from checked against its zip CRC-32 (unless options.input_crc is false). Memory beyond the
// destinations: options.buffer_size for the whole reader, shared by its threads.
//
// The destinations, which read() writes every byte of, are advised to use transparent huge
// pages and their pages are asked for before they are written (madvise MADV_HUGEPAGE and
// MADV_POPULATE_WRITE): fresh memory otherwise faults at every page's first write, which for
// 800 MB took 4-5 s on the development VM instead of 0.1 s.
//
// read() may be called many times, for any tensors (a lazy state dict reads one at a time). A
// record's CRC is checked once every byte of it has been read: by the read that completes the
// record's tensors (so in the first read when it asks for every tensor). The copies of
// replicated and tied tensors of parallel checkpoints are compared by the first read.
//
// Errors are z2f::Error (error.hpp), naming the file and what was expected.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>

#include "zero2fp32/options.hpp"
#include "zero2fp32/plan.hpp"

namespace z2f {

struct ReaderSettings {
    // Threads that share the reads; 0: one per core, at most 8.
    unsigned threads = 0;
};

// Where tensor `tensor` (an index into plan().tensors) goes: exactly numel x
// dtype_size(dtype) bytes, row-major, in `dtype`: by default the plan's output dtype; another
// one the stored dtype converts to (dtype_convert rules) reads the tensor in that one instead
// (DeepSpeed's state dict keeps 16-bit masters 16-bit, a caller may want what is stored).
struct TensorDestination {
    std::size_t tensor = 0;
    std::span<std::byte> bytes;
    std::optional<DType> dtype = std::nullopt;
};

class StateDictReader {
  public:
    // Reads the checkpoint's metadata (zip directories and pickles, no tensor bytes) and plans.
    StateDictReader(const std::filesystem::path& checkpoint, const Options& options,
                    const ReaderSettings& settings = {});
    ~StateDictReader();
    StateDictReader(StateDictReader&&) noexcept;
    StateDictReader& operator=(StateDictReader&&) noexcept;

    // The checkpoint's facts and its tensors in state-dict order, aliases included. `files`
    // and each tensor's `file` are empty: nothing is written.
    const ConversionPlan& plan() const noexcept;
    // Whether tensor `tensor` has bytes of its own to read. False for a tied alias (it shares
    // its owner's memory) unless options.untie asked for a copy of its own.
    bool has_data(std::size_t tensor) const;
    unsigned threads() const noexcept;

    // Fills every destination. `keep_going`, when given, is called on the calling thread about
    // every 50 ms while the threads read; false stops them and read() throws Error(kInterrupted).
    // Thread-safe: concurrent calls run one after the other. A failed read leaves the
    // destinations' contents unspecified and the reader usable.
    void read(std::span<const TensorDestination> destinations,
              const std::function<bool()>& keep_going = {});

  private:
    struct State;
    std::unique_ptr<State> state_;
};

}  // namespace z2f
