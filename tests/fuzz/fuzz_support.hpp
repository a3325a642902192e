// Shared by the libFuzzer harnesses (tests/fuzz/fuzz_*.cpp) and by their replay in the ordinary
// test suite (replay_main.cpp), so that both judge an input by exactly the same rules.
//
// The contract under test (docs/architecture.md, "Reading untrusted files"): hostile input may
// only end in a z2f::Error of a user-facing kind. Everything else is a finding, and the harness
// aborts with a message so that libFuzzer, or CTest, keeps the input:
//   - any exception that is not a z2f::Error, and any z2f::Error of kind kInternal (that kind
//     means a broken invariant, i.e. a bug, not a bad file);
//   - a post-condition the harness checks on a successful result (a record or tensor that lies
//     outside its file, a value tree bigger than its input allows, ...);
//   - whatever the sanitizers report (crash, ASan/UBSan finding, leak, timeout, OOM).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <ostream>
#include <span>
#include <string>
#include <string_view>

#include "pickle/value.hpp"

namespace z2f::fuzz {

// An in-memory file (memfd) that production code opens by path, exactly as it opens
// checkpoints: the readers need a real file descriptor, and a memfd avoids a round trip
// through the file system for each of the thousands of inputs per second.
class ScratchFile {
  public:
    explicit ScratchFile(const char* name);
    ~ScratchFile();
    ScratchFile(const ScratchFile&) = delete;
    ScratchFile& operator=(const ScratchFile&) = delete;

    // Replaces the whole content; returns path().
    const std::string& write(std::span<const std::byte> bytes);
    // "/proc/self/fd/<n>": io::File::open_read opens a fresh descriptor on the same memfd.
    const std::string& path() const noexcept { return path_; }

  private:
    int fd_ = -1;
    std::string path_;
};

// Scratch file number `slot` (0..3), created on first use and reused for every input.
ScratchFile& scratch_file(std::size_t slot);

// Reports a finding on stderr and aborts.
[[noreturn]] void finding(std::string_view target, std::string_view what);

// Aborts with a finding when a post-condition does not hold.
inline void expect(bool holds, std::string_view target, std::string_view what) {
    if (!holds) {
        finding(target, what);
    }
}

// Runs `body`. Returns true when it completed, false when it threw a user-facing z2f::Error
// (the expected outcome for most hostile inputs); anything else is a finding.
bool run_guarded(std::string_view target, const std::function<void()>& body);

// A stream that discards what is written to it, for exercising printers.
std::ostream& null_stream();

std::span<const std::byte> as_bytes(const std::uint8_t* data, std::size_t size) noexcept;

// Calls `visit` once for every object reachable from `root` (Storage objects included, reached
// through tensors). Iterative, with a visited set: value trees from hostile pickles may be
// deep, shared (DAGs) or cyclic.
void for_each_object(const pickle::Value& root,
                     const std::function<void(const pickle::Object&)>& visit);

}  // namespace z2f::fuzz
