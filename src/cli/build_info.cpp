#include "cli/build_info.hpp"

#include <mpi.h>

#include "common/crc32.hpp"
#include "io/async_io.hpp"
#include "output/hdf5_module.hpp"

namespace z2f::cli {
namespace {

// MPI_Get_library_version may be called before MPI_Init, so --version works without a launcher.
// Only its first line: Open MPI and MPICH append build details.
std::string mpi_library_line() {
    char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
    int length = 0;
    if (MPI_Get_library_version(text, &length) != MPI_SUCCESS)
        return "unknown";
    std::string version(text, static_cast<std::size_t>(length > 0 ? length : 0));
    const std::size_t end = version.find_first_of("\r\n,");
    if (end != std::string::npos)
        version.resize(end);
    while (!version.empty() && (version.back() == ' ' || version.back() == '\0'))
        version.pop_back();
    // MPICH separates its label from the number with a tab.
    for (char& c : version) {
        if (c == '\t')
            c = ' ';
    }
    return version;
}

}  // namespace

std::string build_info() {
    std::string text = "MPI: " + mpi_library_line() + "\n";
    text += std::string("direct I/O engine: ") +
            (io::io_uring_built_in() ? "io_uring (threads where the kernel refuses it)"
                                     : "threads (built without liburing)") +
            "\n";
    text += std::string("CRC-32: ") + crc32_implementation() + "\n";
    text += std::string("HDF5 output: ") +
            (output::hdf5_output_built_in() ? "yes" : "no (built without HDF5)") + "\n";
    return text;
}

}  // namespace z2f::cli
