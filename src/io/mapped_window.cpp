#include "io/mapped_window.hpp"

#include <mutex>
#include <setjmp.h>
#include <signal.h>
#include <unistd.h>

#include <sys/mman.h>

#include "common/errors.hpp"
#include "io/call_hook.hpp"

namespace z2f::io {
namespace {

thread_local sigjmp_buf* t_guard = nullptr;
struct sigaction g_previous_sigbus {};

void on_sigbus(int signal, siginfo_t* info, void* context) {
    if (t_guard != nullptr) {
        siglongjmp(*t_guard, 1);
    }
    // Not ours: behave as before the handler was installed.
    if ((g_previous_sigbus.sa_flags & SA_SIGINFO) != 0 &&
        g_previous_sigbus.sa_sigaction != nullptr) {
        g_previous_sigbus.sa_sigaction(signal, info, context);
        return;
    }
    ::signal(SIGBUS, SIG_DFL);
    ::raise(SIGBUS);
}

void install_sigbus_handler() {
    static std::once_flag once;
    std::call_once(once, [] {
        struct sigaction action {};
        action.sa_sigaction = &on_sigbus;
        action.sa_flags = SA_SIGINFO | SA_NODEFER;
        sigemptyset(&action.sa_mask);
        ::sigaction(SIGBUS, &action, &g_previous_sigbus);
    });
}

std::uint64_t page_size() {
    static const auto size = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
    return size;
}

}  // namespace

void with_mapped_range(const File& file, std::uint64_t offset, std::uint64_t length,
                       const std::function<void(std::span<const std::byte>)>& consume) {
    if (length == 0) {
        consume({});
        return;
    }
    install_sigbus_handler();
    std::uint64_t begin = offset / page_size() * page_size();
    auto map_length = static_cast<std::size_t>(offset + length - begin);
    if (const CallFault fault = call_fault(IoCall::kRead, file.path()); fault.error != 0)
        throw_io_error("cannot map", file.path(), fault.error);
    void* address = ::mmap(nullptr, map_length, PROT_READ, MAP_PRIVATE | MAP_POPULATE, file.fd(),
                           static_cast<off_t>(begin));
    if (address == MAP_FAILED) {
        throw_io_error("cannot map", file.path(), errno);
    }
    auto* bytes = static_cast<const std::byte*>(address) + (offset - begin);
    sigjmp_buf guard;
    sigjmp_buf* outer = t_guard;
    if (sigsetjmp(guard, 1) != 0) {
        t_guard = outer;
        ::munmap(address, map_length);
        throw_input_error(file.path(), "shrank while being read (bus error reading " +
                                           std::to_string(length) + " bytes at offset " +
                                           std::to_string(offset) + ")");
    }
    t_guard = &guard;
    try {
        consume(std::span(bytes, static_cast<std::size_t>(length)));
    } catch (...) {
        t_guard = outer;
        ::munmap(address, map_length);
        throw;
    }
    t_guard = outer;
    ::munmap(address, map_length);
    count_bytes_read(length);
}

}  // namespace z2f::io
