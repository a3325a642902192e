// The seam under every file-system call of the I/O module, for tests.
//
// Before each system call on a file or folder (posix_file.cpp, the io_uring engine), the module
// asks the installed hook whether the call should fail with an errno or,
// for a read or a write, move fewer bytes than asked. Tests install one to make the Nth open,
// read, write, sync, truncate, rename, unlink, mkdir, close or directory sync fail in turn
// (tests/support/fault_plan.hpp), the way LevelDB's Env or SQLite's VFS make every I/O call
// replaceable; production runs install none, and then a call costs one relaxed atomic load.
//
// What a fault does, call by call:
//   - `error`: the call is not made and fails with that errno, exactly as the kernel's own
//     failure would reach the caller (EINTR too: the module's retry loops then call again, and
//     the hook is asked again). Two exceptions keep the descriptor table honest: a close is
//     made and then reported failed (Linux frees the descriptor either way), and an io_uring
//     request completes with -errno without reaching the kernel.
//   - `shorten`: a read or write is made for about half the bytes asked (a whole number of
//     4 KiB units on an O_DIRECT descriptor, where the kernel takes nothing else; unchanged
//     when that would be nothing), a genuine short transfer that the caller must complete.
#pragma once

#include <cstdint>
#include <string_view>

namespace z2f::io {

enum class IoCall : std::uint8_t {
    kOpen,           // open(2) of a file or folder
    kRead,           // pread
    kWrite,          // pwrite
    kSync,           // fsync, fdatasync, sync_file_range's wait
    kTruncate,       // ftruncate, fallocate
    kRename,         // rename(2)
    kUnlink,         // unlink(2)
    kMkdir,          // mkdir(2)
    kClose,          // close(2) of a descriptor whose errors are reported
    kSyncDirectory,  // fsync of a folder
    kListDirectory,  // readdir
};
inline constexpr int kIoCallCount = 11;
const char* io_call_name(IoCall call) noexcept;

struct CallFault {
    int error = 0;         // non-zero: the call fails with this errno
    bool shorten = false;  // a read or write moves fewer bytes
    explicit operator bool() const noexcept { return error != 0 || shorten; }
};

class CallHook {
  public:
    virtual ~CallHook() = default;
    // Called from any thread (the I/O engines' workers too), before the call on `path`.
    virtual CallFault before(IoCall call, std::string_view path) noexcept = 0;
};

// Installs `hook` (nullptr: none) for every call from now on; the caller keeps it alive until
// it is uninstalled and no call is in flight.
void install_call_hook(CallHook* hook) noexcept;

// What the installed hook says of a call (no fault without a hook). For the I/O module.
CallFault call_fault(IoCall call, std::string_view path) noexcept;

}  // namespace z2f::io
