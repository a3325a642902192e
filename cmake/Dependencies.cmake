# Every third-party dependency comes through find_package; scripts/install-deps.sh installs the
# Debian 12 packages that provide them.
find_package(MPI REQUIRED COMPONENTS C)
find_package(ZLIB REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(Boost 1.74 REQUIRED COMPONENTS program_options)
# The copy engine's write-behind helper thread (io/write_behind.cpp).
find_package(Threads REQUIRED)

# ISA-L (libisal-dev): CRC-32 with carry-less multiplication, ~10x zlib's crc32 on this
# machine's CPUs (bench/crc32_bench.cpp, docs/io-engine.md). Debian ships no CMake config for
# it, and its pkg-config file is not in every release, so it is found by header and library.
find_path(ISAL_INCLUDE_DIR isa-l/crc.h)
find_library(ISAL_LIBRARY NAMES isal)
if(NOT ISAL_INCLUDE_DIR OR NOT ISAL_LIBRARY)
    message(FATAL_ERROR "ISA-L not found (isa-l/crc.h, libisal): install libisal-dev "
                        "(scripts/install-deps.sh)")
endif()
add_library(ISAL::isal UNKNOWN IMPORTED)
set_target_properties(ISAL::isal PROPERTIES
    IMPORTED_LOCATION ${ISAL_LIBRARY} INTERFACE_INCLUDE_DIRECTORIES ${ISAL_INCLUDE_DIR})
message(STATUS "ISA-L: ${ISAL_LIBRARY}")

# liburing (liburing-dev): the io_uring engine of the direct-I/O writer and reader
# (io/uring_async_io.cpp). At run time a kernel that refuses io_uring gets the thread engine.
find_path(LIBURING_INCLUDE_DIR liburing.h)
find_library(LIBURING_LIBRARY NAMES uring)
if(NOT LIBURING_INCLUDE_DIR OR NOT LIBURING_LIBRARY)
    message(FATAL_ERROR "liburing not found (liburing.h, liburing): install liburing-dev "
                        "(scripts/install-deps.sh)")
endif()
add_library(liburing::liburing UNKNOWN IMPORTED)
set_target_properties(liburing::liburing PROPERTIES
    IMPORTED_LOCATION ${LIBURING_LIBRARY} INTERFACE_INCLUDE_DIRECTORIES ${LIBURING_INCLUDE_DIR})
message(STATUS "liburing: ${LIBURING_LIBRARY}")

# The OpenMPI build of HDF5 (libhdf5-openmpi-dev). We only use the serial C API on it: datasets
# are laid out by the library and their bytes are written by our own copy engine.
set(HDF5_PREFER_PARALLEL TRUE)
find_package(HDF5 REQUIRED COMPONENTS C)
if(NOT HDF5_IS_PARALLEL)
    message(WARNING "HDF5 found at ${HDF5_INCLUDE_DIRS} is not the MPI build; continuing with it")
endif()
add_library(z2f_hdf5 INTERFACE)
target_include_directories(z2f_hdf5 SYSTEM INTERFACE ${HDF5_C_INCLUDE_DIRS} ${HDF5_INCLUDE_DIRS})
target_link_libraries(z2f_hdf5 INTERFACE ${HDF5_C_LIBRARIES} ${HDF5_LIBRARIES})
target_compile_definitions(z2f_hdf5 INTERFACE ${HDF5_DEFINITIONS} ${HDF5_C_DEFINITIONS})

if(Z2F_BUILD_TESTS)
    find_package(GTest REQUIRED)
    include(GoogleTest)
    # mpiexec flags: root needs --allow-run-as-root; two cores need --oversubscribe for 3-4 ranks.
    set(Z2F_MPIEXEC_FLAGS --oversubscribe)
    execute_process(COMMAND id -u OUTPUT_VARIABLE _z2f_uid OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(_z2f_uid STREQUAL "0")
        list(APPEND Z2F_MPIEXEC_FLAGS --allow-run-as-root)
    endif()
    string(REPLACE ";" " " Z2F_MPIEXEC_FLAGS_STRING "${Z2F_MPIEXEC_FLAGS}")
endif()
