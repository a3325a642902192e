#include "mpi_support.hpp"

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <unistd.h>

#include <mpi.h>

#include "mpi/communicator.hpp"

namespace z2f::mpi_test {

namespace fs = std::filesystem;

int rank() {
    return mpi::Communicator(MPI_COMM_WORLD).rank();
}

bool root() {
    return rank() == 0;
}

void barrier() {
    mpi::Communicator(MPI_COMM_WORLD).barrier();
}

const std::string& output_base() {
    static const std::string base = [] {
        const char* dir = std::getenv("Z2F_MPI_OUTPUT_DIR");
        if (dir != nullptr)
            return std::string(dir);
        const std::uint64_t pid =
            mpi::Communicator(MPI_COMM_WORLD).max(root() ? std::uint64_t(::getpid()) : 0);
        return "/tmp/z2f-mpi-tests-" + std::to_string(pid);
    }();
    return base;
}

std::string fresh_output_dir(const std::string& name) {
    std::string path = output_base() + "/" + name;
    if (root()) {
        fs::remove_all(path);
        fs::create_directories(path);
    }
    barrier();
    return path;
}

Outcome run_conversion(const std::string& checkpoint, const std::string& out,
                       const std::function<void(Options&)>& tweak) {
    Options options;
    if (tweak)
        tweak(options);
    Outcome outcome;
    try {
        outcome.result = z2f::convert(checkpoint, out, options, MPI_COMM_WORLD);
    } catch (const ConversionError& error) {
        outcome.error = error.kind();
        outcome.message = error.what();
        outcome.result = error.partial_result();
    } catch (const Error& error) {
        outcome.error = error.kind();
        outcome.message = error.what();
    }
    return outcome;
}

ConvertedAndVerified convert_sharded_and_verify(const std::string& checkpoint,
                                                const std::string& out, OutputFormat format,
                                                const std::function<void(Options&)>& tweak) {
    ConvertedAndVerified outcomes;
    outcomes.converted = run_conversion(checkpoint, out, [&](Options& o) {
        o.format = format;
        if (format == OutputFormat::kHdf5)
            o.max_shard_size.reset();
        else
            o.max_shard_size = 3'000;
        if (tweak)
            tweak(o);
    });
    outcomes.verified = run_conversion(checkpoint, out, [](Options& o) { o.verify = true; });
    return outcomes;
}

}  // namespace z2f::mpi_test
