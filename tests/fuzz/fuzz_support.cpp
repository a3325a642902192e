#include "fuzz_support.hpp"

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cxxabi.h>
#include <exception>
#include <memory>
#include <streambuf>
#include <typeinfo>
#include <unistd.h>
#include <unordered_set>
#include <vector>

#include <sys/mman.h>

#include "common/errors.hpp"

namespace z2f::fuzz {
namespace {

// Harness set-up failures are not findings in the code under test, but they must not pass
// silently either.
[[noreturn]] void setup_failure(const char* what) {
    std::fprintf(stderr, "fuzz harness set-up failed: %s: %s\n", what, std::strerror(errno));
    std::abort();
}

std::string demangled(const std::type_info& type) {
    int status = 0;
    std::unique_ptr<char, decltype(&std::free)> name(
        abi::__cxa_demangle(type.name(), nullptr, nullptr, &status), &std::free);
    return status == 0 && name ? std::string(name.get()) : std::string(type.name());
}

class NullBuffer : public std::streambuf {
  protected:
    int_type overflow(int_type c) override { return traits_type::not_eof(c); }
    std::streamsize xsputn(const char*, std::streamsize count) override { return count; }
};

}  // namespace

ScratchFile::ScratchFile(const char* name) {
    fd_ = ::memfd_create(name, MFD_CLOEXEC);
    if (fd_ < 0) {
        setup_failure("memfd_create");
    }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
}

ScratchFile::~ScratchFile() {
    if (fd_ >= 0) {
        ::close(fd_);
    }
}

const std::string& ScratchFile::write(std::span<const std::byte> bytes) {
    if (::ftruncate(fd_, 0) != 0) {
        setup_failure("ftruncate");
    }
    std::size_t done = 0;
    while (done < bytes.size()) {
        ssize_t n =
            ::pwrite(fd_, bytes.data() + done, bytes.size() - done, static_cast<off_t>(done));
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            setup_failure("pwrite");
        }
        done += static_cast<std::size_t>(n);
    }
    return path_;
}

ScratchFile& scratch_file(std::size_t slot) {
    static std::array<std::unique_ptr<ScratchFile>, 4> files;
    if (slot >= files.size()) {
        std::fprintf(stderr, "fuzz harness: scratch file slot %zu out of range\n", slot);
        std::abort();
    }
    if (!files[slot]) {
        std::string name = "z2f-fuzz-" + std::to_string(slot);
        files[slot] = std::make_unique<ScratchFile>(name.c_str());
    }
    return *files[slot];
}

void finding(std::string_view target, std::string_view what) {
    std::fprintf(stderr, "\n==z2f-fuzz== FINDING in %.*s: %.*s\n", static_cast<int>(target.size()),
                 target.data(), static_cast<int>(what.size()), what.data());
    std::fflush(stderr);
    std::abort();
}

bool run_guarded(std::string_view target, const std::function<void()>& body) {
    try {
        body();
        return true;
    } catch (const Error& error) {
        if (error.kind() == ErrorKind::kInternal) {
            finding(target, std::string("z2f::Error of kind kInternal (a broken invariant): ") +
                                error.what());
        }
        return false;
    } catch (const std::exception& error) {
        finding(target, "unexpected exception " + demangled(typeid(error)) + ": " + error.what());
    }
    // Anything else propagates to std::terminate, which aborts: a finding as well.
}

std::ostream& null_stream() {
    static NullBuffer buffer;
    static std::ostream stream(&buffer);
    return stream;
}

std::span<const std::byte> as_bytes(const std::uint8_t* data, std::size_t size) noexcept {
    if (size == 0) {
        return {};
    }
    return {reinterpret_cast<const std::byte*>(data), size};
}

void for_each_object(const pickle::Value& root,
                     const std::function<void(const pickle::Object&)>& visit) {
    std::unordered_set<const pickle::Object*> seen;
    std::vector<const pickle::Object*> pending;
    auto push = [&](const pickle::Value& value) {
        const pickle::Object* object = value.as_object();
        if (object != nullptr && seen.insert(object).second) {
            pending.push_back(object);
        }
    };
    push(root);
    while (!pending.empty()) {
        const pickle::Object* object = pending.back();
        pending.pop_back();
        visit(*object);
        switch (object->type) {
            case pickle::ObjectType::kTuple:
            case pickle::ObjectType::kList:
            case pickle::ObjectType::kSet:
                for (const pickle::Value& item :
                     static_cast<const pickle::Sequence*>(object)->items) {
                    push(item);
                }
                break;
            case pickle::ObjectType::kDict: {
                const auto* dict = static_cast<const pickle::Dict*>(object);
                for (const auto& [key, value] : dict->items) {
                    push(key);
                    push(value);
                }
                push(dict->state);
                break;
            }
            case pickle::ObjectType::kInstance: {
                const auto* instance = static_cast<const pickle::Instance*>(object);
                push(instance->callable);
                push(instance->args);
                push(instance->kwargs);
                push(instance->state);
                for (const pickle::Value& item : instance->list_items) {
                    push(item);
                }
                for (const auto& [key, value] : instance->dict_items) {
                    push(key);
                    push(value);
                }
                break;
            }
            case pickle::ObjectType::kTensor: {
                const pickle::Storage* storage =
                    static_cast<const pickle::Tensor*>(object)->storage;
                if (storage != nullptr && seen.insert(storage).second) {
                    pending.push_back(storage);
                }
                break;
            }
            default:
                break;
        }
    }
}

}  // namespace z2f::fuzz
