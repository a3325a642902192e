// The one place where this program makes file-system system calls.
//
// Every call retries on EINTR, loops over short reads and writes, and turns a failure into a
// z2f::Error that names the path and the operation. The byte counters here are the source of
// the "bytes read / written" figures in the run summary and the benchmark.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace z2f::io {

// Bytes moved by this process through this module (reads and writes, and the bytes --verify
// compares), and the time the direct engine's caller spent blocked on the
// kernel: for a read it needs (DirectReader) and for a write block to come free or a file to
// reach the disk (DirectWriter). The waits say which side a direct run is bound by: reads
// that do not hide behind the writes show up as read waits.
struct IoCounters {
    std::uint64_t bytes_read = 0;
    std::uint64_t bytes_written = 0;
    std::uint64_t read_wait_ns = 0;
    std::uint64_t write_wait_ns = 0;
};
IoCounters io_counters() noexcept;
void count_bytes_read(std::uint64_t bytes) noexcept;
void count_bytes_written(std::uint64_t bytes) noexcept;
void count_read_wait(std::uint64_t nanoseconds) noexcept;
void count_write_wait(std::uint64_t nanoseconds) noexcept;
// Nanoseconds of the monotonic clock, for the waits above.
std::uint64_t monotonic_ns() noexcept;

// What the file system demands of O_DIRECT transfers on a file (statx STATX_DIOALIGN, Linux
// 6.1+). `reported` is false where the kernel or the file system does not say (tmpfs, older
// kernels, most network file systems); the fields are then the conservative 4096 (the page
// size, which every file system that takes O_DIRECT at all accepts).
struct DirectIoAlignment {
    std::uint32_t memory = 4096;  // buffer address and length
    std::uint32_t offset = 4096;  // file offset and length
    bool reported = false;
};

// Which kind of descriptor File::try_open_direct asks for.
enum class DirectOpen : std::uint8_t {
    kRead,   // O_RDONLY
    kWrite,  // O_WRONLY | O_CREAT, no truncation (ranges of a shared file)
};

// An open file descriptor, closed on destruction. Move-only.
class File {
  public:
    File() = default;
    ~File();
    File(File&& other) noexcept;
    File& operator=(File&& other) noexcept;
    File(const File&) = delete;
    File& operator=(const File&) = delete;

    // Opens an existing file read-only. Refuses directories with a clear message.
    static File open_read(const std::string& path);
    // Opens (creating if needed, mode 0644) for writing without truncating.
    static File open_write(const std::string& path);
    // Creates or truncates for writing.
    static File create_truncate(const std::string& path);
    // Opens with O_DIRECT (transfers bypass the page cache); nullopt when the file system
    // refuses O_DIRECT at open (EINVAL: tmpfs before Linux 6.6, some FUSE mounts). Other
    // failures throw as the plain opens do.
    static std::optional<File> try_open_direct(const std::string& path, DirectOpen mode);

    bool is_open() const noexcept { return fd_ >= 0; }
    int fd() const noexcept { return fd_; }
    const std::string& path() const noexcept { return path_; }

    std::uint64_t size() const;

    // Reads exactly out.size() bytes at offset, or throws an input error naming the file, the
    // offset and how many bytes were missing (a truncated file).
    void read_exact(std::uint64_t offset, std::span<std::byte> out) const;
    // Reads up to out.size() bytes; returns how many were read (short only at end of file).
    std::size_t read_at_most(std::uint64_t offset, std::span<std::byte> out) const;
    void write_all(std::uint64_t offset, std::span<const std::byte> data) const;
    // One pread/pwrite (retried on EINTR only): the bytes transferred, or -errno. For the
    // asynchronous engines, which handle short transfers and errors themselves; these do not
    // count bytes (the engines count what completes).
    std::int64_t read_once(std::uint64_t offset, std::span<std::byte> out) const noexcept;
    std::int64_t write_once(std::uint64_t offset, std::span<const std::byte> data) const noexcept;

    DirectIoAlignment direct_io_alignment() const noexcept;
    // Turns O_DIRECT off on this descriptor (fcntl F_SETFL): the fallback when the file system
    // took O_DIRECT at open but refuses the transfers (EINVAL). Returns false if it cannot.
    bool stop_direct_io() const noexcept;
    // Reserves [offset, offset + length) (fallocate mode 0; the size grows to cover it).
    // Returns false where the file system cannot (EOPNOTSUPP...); ENOSPC/EDQUOT/EFBIG throw:
    // a full disk is better found before the first byte than after the last.
    bool allocate(std::uint64_t offset, std::uint64_t length) const;
    // Fraction of the pages of [offset, offset + length) now in the page cache (mincore on a
    // temporary read-only mapping; touches no page). 0 for an empty range or when the kernel
    // cannot tell; the range is clamped to the file size.
    double cached_fraction(std::uint64_t offset, std::uint64_t length) const noexcept;

    void truncate(std::uint64_t size) const;
    // One ftruncate (retried on EINTR): 0 or -errno, for the asynchronous engines.
    std::int64_t truncate_once(std::uint64_t size) const noexcept;
    void sync() const;
    // fdatasync: the data (and the size), without the other metadata.
    void sync_data() const;
    // One fdatasync (retried on EINTR): 0 or -errno, for the asynchronous engines.
    std::int64_t sync_data_once() const noexcept;
    // Starts write-back of a range without waiting (sync_file_range); a no-op where unsupported.
    void start_writeback(std::uint64_t offset, std::uint64_t length) const;
    // Drops the range from the page cache (posix_fadvise DONTNEED); advisory, never fails.
    void drop_cache(std::uint64_t offset, std::uint64_t length) const;
    // A second descriptor of the same open file (dup), for work done after this one may be
    // closed; nullopt when none is available (EMFILE...).
    std::optional<File> try_duplicate() const noexcept;
    void close();

  private:
    File(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
    int fd_ = -1;
    std::string path_;
};

// Reads a whole small file (at most max_bytes, else an input error).
std::string read_small_file(const std::string& path, std::size_t max_bytes);
// Reads until end of file, at most max_bytes, without trusting the size the file system
// reports: the files of /proc say 0.
std::string read_unsized_file(const std::string& path, std::size_t max_bytes);
// Writes a small file through a temporary name (temp_name_of), fsync, and rename: never
// half-written; on failure the temporary file is removed (best effort) and the error thrown.
void write_file_atomically(const std::string& path, std::string_view content);

// Where a file is written until it is complete: `path` + kTempSuffix. Every file this program
// writes goes through such a name, so that a name without the suffix is always a finished file,
// and a later run recognises the suffixed ones as its own leftovers.
inline constexpr std::string_view kTempSuffix = ".tmp";
std::string temp_name_of(const std::string& path);

// For the call hook's short transfers (call_hook.hpp): about half of `length`, in whole 4 KiB
// units on an O_DIRECT descriptor; `length` itself when that would be nothing.
std::size_t shortened_length(int fd, std::size_t length) noexcept;

bool path_exists(const std::string& path);
bool is_directory(const std::string& path);
bool is_regular_file(const std::string& path);
// Whether the path itself is a symbolic link (lstat; the target is not followed).
bool is_symbolic_link(const std::string& path);
// Why a path is not a regular file: "is a directory", "cannot be opened: <strerror>" (a broken
// or looping symbolic link, a missing file), "is not a regular file" (device, FIFO, socket).
std::string why_not_regular_file(const std::string& path);
// Names (not paths) of the entries of a directory, unsorted, without "." and "..".
std::vector<std::string> list_directory(const std::string& path);
// mkdir -p.
void make_directories(const std::string& path);
void rename_file(const std::string& from, const std::string& to);
// Removes a file; a missing file is not an error. Returns whether something was removed.
bool remove_file(const std::string& path);
void sync_directory(const std::string& path);
// Free bytes for an unprivileged writer in the file system holding `path` (statvfs).
std::uint64_t free_bytes(const std::string& path);
// Size of a file (stat), or throws.
std::uint64_t file_size(const std::string& path);
// Bytes of storage the file occupies (stat's st_blocks x 512): below file_size() for sparse
// files with holes, at or above it otherwise.
std::uint64_t allocated_bytes(const std::string& path);
// Whether the current process may create files in the directory.
bool is_writable_directory(const std::string& path);
// Canonical absolute path (realpath); throws when it does not exist.
std::string absolute_path(const std::string& path);

// Raises RLIMIT_NOFILE's soft limit to the hard limit; returns the resulting soft limit.
std::uint64_t raise_open_file_limit();

}  // namespace z2f::io
