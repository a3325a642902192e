#include "output/hdf5_module.hpp"

#include <bit>
#include <dlfcn.h>
#include <filesystem>
#include <string>

#include "common/errors.hpp"

namespace z2f::output {
namespace {

// Any object of this library: dladdr of its address names the file the library was loaded from.
const char kThisLibrary = 0;

struct LoadedModule {
    Hdf5LayoutFunction layout = nullptr;
    std::string error;  // when layout is null
};

LoadedModule load_module() {
    Dl_info info{};
    if (::dladdr(&kThisLibrary, &info) == 0 || info.dli_fname == nullptr)
        return {nullptr, "the loader cannot say where libzero2fp32 was loaded from"};
    const std::filesystem::path library = std::filesystem::path(info.dli_fname);
    const std::string path = (library.parent_path() / kHdf5ModuleName).string();
    // RTLD_NOW: a missing symbol is an error here, not a crash in the middle of a layout.
    void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
        const char* why = ::dlerror();
        return {nullptr, path + ": " + (why != nullptr ? why : "dlopen failed")};
    }
    // Never closed: the module stays for the life of the process.
    void* entry = ::dlsym(handle, kHdf5ModuleEntry);
    if (entry == nullptr)
        return {nullptr, path + ": no symbol " + kHdf5ModuleEntry};
    return {std::bit_cast<Hdf5ModuleEntry>(entry)(), {}};
}

}  // namespace

bool hdf5_output_built_in() noexcept {
    return Z2F_HAVE_HDF5;
}

Hdf5LayoutFunction hdf5_layout_function() {
    if (!hdf5_output_built_in())
        throw_usage_error(
            "--format hdf5: this build of zero2fp32 has no HDF5 output; configure it with "
            "-DZ2F_WITH_HDF5=ON (HDF5's C library, e.g. Debian's libhdf5-dev, and without "
            "Z2F_STATIC_DEPS) and build again, or choose --format safetensors or torch");
    // A function-local static is initialised once, thread-safely, on first use.
    static const LoadedModule module = load_module();
    if (module.layout == nullptr)
        throw_output_error("HDF5 output needs the module " + std::string(kHdf5ModuleName) +
                           " next to libzero2fp32, which could not be loaded: " + module.error);
    return module.layout;
}

}  // namespace z2f::output
