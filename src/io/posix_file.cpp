#include "io/posix_file.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <memory>
#include <string>
#include <unistd.h>
#include <vector>

#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "common/errors.hpp"
#include "io/call_hook.hpp"

namespace z2f::io {
namespace {

std::atomic<std::uint64_t> g_bytes_read{0};
std::atomic<std::uint64_t> g_bytes_written{0};
std::atomic<std::uint64_t> g_read_wait_ns{0};
std::atomic<std::uint64_t> g_write_wait_ns{0};

// Largest single read/write request; Linux caps one transfer at 0x7ffff000 bytes anyway.
constexpr std::size_t kMaxTransfer = std::size_t{1} << 30;

std::atomic<CallHook*> g_call_hook{nullptr};

// Runs `call` (a system call returning -1 and setting errno on failure) unless the hook fails
// it: then it returns -1 with the hook's errno, without calling.
template <typename Call>
auto hooked(IoCall kind, std::string_view path, Call&& call) -> decltype(call()) {
    if (const CallFault fault = call_fault(kind, path); fault.error != 0) {
        errno = fault.error;
        return -1;
    }
    return call();
}

// A read or write of `length` bytes that the hook may shorten (call_hook.hpp). Returns the
// length to ask for, or nullopt when the hook fails the call (errno set).
std::optional<std::size_t> hooked_length(IoCall kind, int fd, std::string_view path,
                                         std::size_t length) {
    const CallFault fault = call_fault(kind, path);
    if (fault.error != 0) {
        errno = fault.error;
        return std::nullopt;
    }
    return fault.shorten ? shortened_length(fd, length) : length;
}

int open_checked(const std::string& path, int flags, const char* what) {
    int fd;
    do {
        fd = hooked(IoCall::kOpen, path,
                    [&] { return ::open(path.c_str(), flags | O_CLOEXEC, 0644); });
    } while (fd < 0 && errno == EINTR);
    if (fd < 0) {
        throw_io_error(what, path, errno);
    }
    return fd;
}

}  // namespace

const char* io_call_name(IoCall call) noexcept {
    switch (call) {
        case IoCall::kOpen:
            return "open";
        case IoCall::kRead:
            return "read";
        case IoCall::kWrite:
            return "write";
        case IoCall::kSync:
            return "sync";
        case IoCall::kTruncate:
            return "truncate";
        case IoCall::kRename:
            return "rename";
        case IoCall::kUnlink:
            return "unlink";
        case IoCall::kMkdir:
            return "mkdir";
        case IoCall::kClose:
            return "close";
        case IoCall::kSyncDirectory:
            return "directory sync";
        case IoCall::kListDirectory:
            return "list directory";
    }
    return "?";
}

void install_call_hook(CallHook* hook) noexcept {
    g_call_hook.store(hook, std::memory_order_release);
}

CallFault call_fault(IoCall call, std::string_view path) noexcept {
    CallHook* hook = g_call_hook.load(std::memory_order_acquire);
    return hook == nullptr ? CallFault{} : hook->before(call, path);
}

std::size_t shortened_length(int fd, std::size_t length) noexcept {
    const int flags = ::fcntl(fd, F_GETFL);
    // O_DIRECT takes whole units only; 4096 is what every file system that has it accepts.
    const std::size_t unit = flags >= 0 && (flags & O_DIRECT) != 0 ? 4096 : 1;
    const std::size_t shorter = length / 2 / unit * unit;
    return shorter == 0 ? length : shorter;
}

IoCounters io_counters() noexcept {
    return {g_bytes_read.load(std::memory_order_relaxed),
            g_bytes_written.load(std::memory_order_relaxed),
            g_read_wait_ns.load(std::memory_order_relaxed),
            g_write_wait_ns.load(std::memory_order_relaxed)};
}
void count_bytes_read(std::uint64_t bytes) noexcept {
    g_bytes_read.fetch_add(bytes, std::memory_order_relaxed);
}
void count_bytes_written(std::uint64_t bytes) noexcept {
    g_bytes_written.fetch_add(bytes, std::memory_order_relaxed);
}
std::uint64_t monotonic_ns() noexcept {
    return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                          std::chrono::steady_clock::now().time_since_epoch())
                                          .count());
}
void count_read_wait(std::uint64_t nanoseconds) noexcept {
    g_read_wait_ns.fetch_add(nanoseconds, std::memory_order_relaxed);
}
void count_write_wait(std::uint64_t nanoseconds) noexcept {
    g_write_wait_ns.fetch_add(nanoseconds, std::memory_order_relaxed);
}

File::~File() {
    if (fd_ >= 0) {
        ::close(fd_);  // errors on close of a read fd carry no information; writes are fsynced
    }
}

File::File(File&& other) noexcept : fd_(other.fd_), path_(std::move(other.path_)) {
    other.fd_ = -1;
}

File& File::operator=(File&& other) noexcept {
    if (this != &other) {
        if (fd_ >= 0) {
            ::close(fd_);
        }
        fd_ = other.fd_;
        path_ = std::move(other.path_);
        other.fd_ = -1;
    }
    return *this;
}

File File::open_read(const std::string& path) {
    int fd = open_checked(path, O_RDONLY, "cannot open");
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        int err = errno;
        ::close(fd);
        throw_io_error("cannot stat", path, err);
    }
    if (S_ISDIR(st.st_mode)) {
        ::close(fd);
        throw_input_error(path, "is a directory, expected a file");
    }
    return File(fd, path);
}

File File::open_write(const std::string& path) {
    return File(open_checked(path, O_WRONLY | O_CREAT, "cannot open for writing"), path);
}

File File::create_truncate(const std::string& path) {
    return File(open_checked(path, O_WRONLY | O_CREAT | O_TRUNC, "cannot create"), path);
}

std::uint64_t File::size() const {
    struct stat st {};
    if (::fstat(fd_, &st) != 0) {
        throw_io_error("cannot stat", path_, errno);
    }
    return static_cast<std::uint64_t>(st.st_size);
}

std::optional<File> File::try_open_direct(const std::string& path, DirectOpen mode) {
    int flags = mode == DirectOpen::kRead ? O_RDONLY : O_WRONLY | O_CREAT;
    int fd;
    do {
        fd = hooked(IoCall::kOpen, path,
                    [&] { return ::open(path.c_str(), flags | O_DIRECT | O_CLOEXEC, 0644); });
    } while (fd < 0 && errno == EINTR);
    if (fd < 0) {
        if (errno == EINVAL) {
            return std::nullopt;
        }
        throw_io_error(mode == DirectOpen::kRead ? "cannot open" : "cannot open for writing", path,
                       errno);
    }
    File file(fd, path);
    if (mode == DirectOpen::kRead) {
        struct stat st {};
        if (::fstat(fd, &st) != 0) {
            throw_io_error("cannot stat", path, errno);
        }
        if (S_ISDIR(st.st_mode)) {
            throw_input_error(path, "is a directory, expected a file");
        }
    }
    return file;
}

std::int64_t File::read_once(std::uint64_t offset, std::span<std::byte> out) const noexcept {
    while (true) {
        const std::optional<std::size_t> want =
            hooked_length(IoCall::kRead, fd_, path_, std::min(out.size(), kMaxTransfer));
        ssize_t got = want ? ::pread(fd_, out.data(), *want, static_cast<off_t>(offset)) : -1;
        if (got >= 0) {
            return got;
        }
        if (errno != EINTR) {
            return -errno;
        }
    }
}

std::int64_t File::write_once(std::uint64_t offset,
                              std::span<const std::byte> data) const noexcept {
    while (true) {
        const std::optional<std::size_t> want =
            hooked_length(IoCall::kWrite, fd_, path_, std::min(data.size(), kMaxTransfer));
        ssize_t put = want ? ::pwrite(fd_, data.data(), *want, static_cast<off_t>(offset)) : -1;
        if (put >= 0) {
            return put;
        }
        if (errno != EINTR) {
            return -errno;
        }
    }
}

DirectIoAlignment File::direct_io_alignment() const noexcept {
    DirectIoAlignment alignment;
    struct statx info {};
    if (::statx(fd_, "", AT_EMPTY_PATH, STATX_DIOALIGN, &info) == 0 &&
        (info.stx_mask & STATX_DIOALIGN) != 0 && info.stx_dio_offset_align != 0) {
        alignment.memory = info.stx_dio_mem_align;
        alignment.offset = info.stx_dio_offset_align;
        alignment.reported = true;
    }
    return alignment;
}

bool File::stop_direct_io() const noexcept {
    int flags = ::fcntl(fd_, F_GETFL);
    return flags >= 0 && ::fcntl(fd_, F_SETFL, flags & ~O_DIRECT) == 0;
}

bool File::allocate(std::uint64_t offset, std::uint64_t length) const {
    if (length == 0) {
        return true;
    }
    int rc;
    do {
        rc = hooked(IoCall::kTruncate, path_, [&] {
            return ::fallocate(fd_, 0, static_cast<off_t>(offset), static_cast<off_t>(length));
        });
    } while (rc != 0 && errno == EINTR);
    if (rc == 0) {
        return true;
    }
    if (errno == ENOSPC || errno == EDQUOT || errno == EFBIG) {
        throw_io_error("cannot reserve space for", path_, errno);
    }
    return false;  // EOPNOTSUPP, ENOSYS, EINVAL...: the writes allocate as they go
}

double File::cached_fraction(std::uint64_t offset, std::uint64_t length) const noexcept {
    struct stat st {};
    if (::fstat(fd_, &st) != 0) {
        return 0.0;
    }
    const auto file_size = static_cast<std::uint64_t>(st.st_size);
    if (offset >= file_size) {
        return 0.0;
    }
    length = std::min(length, file_size - offset);
    const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
    const std::uint64_t begin = offset / page * page;
    const std::uint64_t end = (offset + length + page - 1) / page * page;
    if (end == begin) {
        return 0.0;
    }
    const auto map_length = static_cast<std::size_t>(end - begin);
    void* mapping =
        ::mmap(nullptr, map_length, PROT_READ, MAP_SHARED, fd_, static_cast<off_t>(begin));
    if (mapping == MAP_FAILED) {
        return 0.0;
    }
    std::vector<unsigned char> resident(map_length / page);
    double fraction = 0.0;
    if (::mincore(mapping, map_length, resident.data()) == 0) {
        std::size_t count = 0;
        for (unsigned char flags : resident) {
            count += flags & 1u;
        }
        fraction = static_cast<double>(count) / static_cast<double>(resident.size());
    }
    ::munmap(mapping, map_length);
    return fraction;
}

std::size_t File::read_at_most(std::uint64_t offset, std::span<std::byte> out) const {
    std::size_t done = 0;
    while (done < out.size()) {
        const std::optional<std::size_t> want =
            hooked_length(IoCall::kRead, fd_, path_, std::min(out.size() - done, kMaxTransfer));
        ssize_t got =
            want ? ::pread(fd_, out.data() + done, *want, static_cast<off_t>(offset + done)) : -1;
        if (got < 0) {
            if (errno == EINTR) {
                continue;
            }
            throw_io_error("cannot read at offset " + std::to_string(offset + done) + " of", path_,
                           errno);
        }
        if (got == 0) {
            break;  // end of file
        }
        done += static_cast<std::size_t>(got);
    }
    count_bytes_read(done);
    return done;
}

void File::read_exact(std::uint64_t offset, std::span<std::byte> out) const {
    std::size_t got = read_at_most(offset, out);
    if (got != out.size()) {
        throw_input_error(path_, "file is truncated: expected " + std::to_string(out.size()) +
                                     " bytes at offset " + std::to_string(offset) + ", found " +
                                     std::to_string(got) + " (file size " + std::to_string(size()) +
                                     ")");
    }
}

void File::write_all(std::uint64_t offset, std::span<const std::byte> data) const {
    std::size_t done = 0;
    while (done < data.size()) {
        const std::optional<std::size_t> want =
            hooked_length(IoCall::kWrite, fd_, path_, std::min(data.size() - done, kMaxTransfer));
        ssize_t put =
            want ? ::pwrite(fd_, data.data() + done, *want, static_cast<off_t>(offset + done)) : -1;
        if (put < 0) {
            if (errno == EINTR) {
                continue;
            }
            throw_io_error("cannot write at offset " + std::to_string(offset + done) + " of", path_,
                           errno);
        }
        if (put == 0) {  // took nothing and said nothing
            throw_io_error("cannot write at offset " + std::to_string(offset + done) + " of", path_,
                           EIO);
        }
        done += static_cast<std::size_t>(put);
    }
    count_bytes_written(done);
}

void File::truncate(std::uint64_t size) const {
    int rc;
    do {
        rc = hooked(IoCall::kTruncate, path_,
                    [&] { return ::ftruncate(fd_, static_cast<off_t>(size)); });
    } while (rc != 0 && errno == EINTR);
    if (rc != 0) {
        throw_io_error("cannot set the size of", path_, errno);
    }
}

std::int64_t File::truncate_once(std::uint64_t size) const noexcept {
    int rc;
    do {
        rc = hooked(IoCall::kTruncate, path_,
                    [&] { return ::ftruncate(fd_, static_cast<off_t>(size)); });
    } while (rc != 0 && errno == EINTR);
    return rc == 0 ? 0 : -static_cast<std::int64_t>(errno);
}

namespace {

// fsync or fdatasync, retried on EINTR.
void sync_or_throw(int (*sync_call)(int), int fd, const std::string& path) {
    int rc;
    do {
        rc = hooked(IoCall::kSync, path, [&] { return sync_call(fd); });
    } while (rc != 0 && errno == EINTR);
    if (rc != 0) {
        throw_io_error("cannot fsync", path, errno);
    }
}

}  // namespace

void File::sync() const {
    sync_or_throw(::fsync, fd_, path_);
}

void File::sync_data() const {
    sync_or_throw(::fdatasync, fd_, path_);
}

std::int64_t File::sync_data_once() const noexcept {
    int rc;
    do {
        rc = hooked(IoCall::kSync, path_, [&] { return ::fdatasync(fd_); });
    } while (rc != 0 && errno == EINTR);
    return rc == 0 ? 0 : -static_cast<std::int64_t>(errno);
}

void File::start_writeback(std::uint64_t offset, std::uint64_t length) const {
    // Best effort: file systems without sync_file_range simply keep the pages dirty until fsync.
    (void)::sync_file_range(fd_, static_cast<off_t>(offset), static_cast<off_t>(length),
                            SYNC_FILE_RANGE_WRITE);
}

void File::drop_cache(std::uint64_t offset, std::uint64_t length) const {
    (void)::posix_fadvise(fd_, static_cast<off_t>(offset), static_cast<off_t>(length),
                          POSIX_FADV_DONTNEED);
}

std::optional<File> File::try_duplicate() const noexcept {
    int fd = ::fcntl(fd_, F_DUPFD_CLOEXEC, 0);
    if (fd < 0) {
        return std::nullopt;
    }
    try {
        return File(fd, path_);
    } catch (...) {  // the path's copy
        ::close(fd);
        return std::nullopt;
    }
}

void File::close() {
    if (fd_ >= 0) {
        // Linux frees the descriptor whatever close returns, so it is never called twice; an
        // injected failure comes after the real close for the same reason.
        int rc = ::close(fd_);
        fd_ = -1;
        int err = errno;
        if (const CallFault fault = call_fault(IoCall::kClose, path_); fault.error != 0) {
            rc = -1;
            err = fault.error;
        }
        if (rc != 0 && err != EINTR) {
            throw_io_error("cannot close", path_, err);
        }
    }
}

std::string read_small_file(const std::string& path, std::size_t max_bytes) {
    File file = File::open_read(path);
    std::uint64_t size = file.size();
    if (size > max_bytes) {
        throw_input_error(path, "is " + std::to_string(size) + " bytes, expected at most " +
                                    std::to_string(max_bytes));
    }
    std::string content(static_cast<std::size_t>(size), '\0');
    std::size_t got =
        file.read_at_most(0, std::as_writable_bytes(std::span(content.data(), content.size())));
    content.resize(got);
    return content;
}

std::string read_unsized_file(const std::string& path, std::size_t max_bytes) {
    File file = File::open_read(path);
    std::string content;
    constexpr std::size_t kStep = 4096;
    while (content.size() < max_bytes) {
        const std::size_t before = content.size();
        content.resize(before + std::min(kStep, max_bytes - before));
        std::size_t got = file.read_at_most(
            before,
            std::as_writable_bytes(std::span(content.data() + before, content.size() - before)));
        content.resize(before + got);
        if (got == 0)
            break;
    }
    return content;
}

void write_file_atomically(const std::string& path, std::string_view content) {
    const std::string temp = temp_name_of(path);
    try {
        File file = File::create_truncate(temp);
        file.write_all(0, std::as_bytes(std::span(content.data(), content.size())));
        file.sync();
        file.close();
        rename_file(temp, path);
    } catch (...) {
        // The temp name is ours alone; what failed is reported, not a leftover.
        try {
            remove_file(temp);
        } catch (const Error&) {
            // Left for the next run's clean-up (a temp name never counts as an output).
        }
        throw;
    }
}

std::string temp_name_of(const std::string& path) {
    return path + std::string(kTempSuffix);
}

bool path_exists(const std::string& path) {
    struct stat st {};
    return ::lstat(path.c_str(), &st) == 0;
}

bool is_directory(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool is_regular_file(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool is_symbolic_link(const std::string& path) {
    struct stat st {};
    return ::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode);
}

std::string why_not_regular_file(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
        return std::string("cannot be opened: ") + std::strerror(errno);
    }
    if (S_ISDIR(st.st_mode)) {
        return "is a directory, expected a file";
    }
    return "is not a regular file";
}

std::vector<std::string> list_directory(const std::string& path) {
    std::unique_ptr<DIR, int (*)(DIR*)> dir(::opendir(path.c_str()), &::closedir);
    if (!dir) {
        throw_io_error("cannot list directory", path, errno);
    }
    std::vector<std::string> names;
    CallFault fault = call_fault(IoCall::kListDirectory, path);
    while (fault.error == EINTR)  // as a real interrupted call would be: again
        fault = call_fault(IoCall::kListDirectory, path);
    if (fault.error != 0) {
        throw_io_error("cannot list directory", path, fault.error);
    }
    errno = 0;
    while (const dirent* entry = ::readdir(dir.get())) {
        std::string_view name(entry->d_name);
        if (name != "." && name != "..") {
            names.emplace_back(name);
        }
    }
    if (errno != 0) {
        throw_io_error("cannot list directory", path, errno);
    }
    return names;
}

void make_directories(const std::string& path) {
    if (path.empty() || is_directory(path)) {
        return;
    }
    auto slash = path.find_last_of('/');
    if (slash != std::string::npos && slash > 0) {
        make_directories(path.substr(0, slash));
    }
    int rc;
    do {
        rc = hooked(IoCall::kMkdir, path, [&] { return ::mkdir(path.c_str(), 0755); });
    } while (rc != 0 && errno == EINTR);
    if (rc != 0 && errno != EEXIST) {
        throw_io_error("cannot create directory", path, errno);
    }
    if (!is_directory(path)) {
        throw_output_error("'" + path + "' exists and is not a directory");
    }
}

void rename_file(const std::string& from, const std::string& to) {
    int rc;
    do {
        rc = hooked(IoCall::kRename, from, [&] { return ::rename(from.c_str(), to.c_str()); });
    } while (rc != 0 && errno == EINTR);
    if (rc != 0) {
        throw_io_error("cannot rename '" + from + "' to", to, errno);
    }
}

bool remove_file(const std::string& path) {
    int rc;
    do {
        rc = hooked(IoCall::kUnlink, path, [&] { return ::unlink(path.c_str()); });
    } while (rc != 0 && errno == EINTR);
    if (rc == 0) {
        return true;
    }
    if (errno == ENOENT) {
        return false;
    }
    throw_io_error("cannot remove", path, errno);
}

void sync_directory(const std::string& path) {
    int fd = open_checked(path, O_RDONLY | O_DIRECTORY, "cannot open directory");
    int rc;
    do {
        rc = hooked(IoCall::kSyncDirectory, path, [&] { return ::fsync(fd); });
    } while (rc != 0 && errno == EINTR);
    int err = errno;
    ::close(fd);
    // Some file systems (and some FUSE mounts) refuse fsync on directories; that is not fatal.
    if (rc != 0 && err != EINVAL && err != EROFS) {
        throw_io_error("cannot fsync directory", path, err);
    }
}

std::uint64_t free_bytes(const std::string& path) {
    struct statvfs st {};
    if (::statvfs(path.c_str(), &st) != 0) {
        throw_io_error("cannot query free space of", path, errno);
    }
    return static_cast<std::uint64_t>(st.f_bavail) * st.f_frsize;
}

std::uint64_t file_size(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
        throw_io_error("cannot stat", path, errno);
    }
    return static_cast<std::uint64_t>(st.st_size);
}

std::uint64_t allocated_bytes(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
        throw_io_error("cannot stat", path, errno);
    }
    // POSIX counts st_blocks in 512-byte units whatever the file system's block size.
    return static_cast<std::uint64_t>(st.st_blocks) * 512u;
}

bool is_writable_directory(const std::string& path) {
    return is_directory(path) && ::access(path.c_str(), W_OK | X_OK) == 0;
}

std::string absolute_path(const std::string& path) {
    std::unique_ptr<char, void (*)(void*)> resolved(::realpath(path.c_str(), nullptr), &std::free);
    if (!resolved) {
        throw_io_error("cannot resolve", path, errno);
    }
    return std::string(resolved.get());
}

std::uint64_t raise_open_file_limit() {
    struct rlimit limit {};
    if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) {
        return 1024;
    }
    if (limit.rlim_cur < limit.rlim_max) {
        struct rlimit raised = limit;
        raised.rlim_cur = limit.rlim_max;
        if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) {
            limit = raised;
        }
    }
    return limit.rlim_cur == RLIM_INFINITY ? std::uint64_t{1} << 20 : limit.rlim_cur;
}

}  // namespace z2f::io
