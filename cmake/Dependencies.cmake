include(CheckSymbolExists)

# Third-party dependencies, every one through find_package, find_path or find_library, so that a
# site's installation (environment modules, CMAKE_PREFIX_PATH, MPI_HOME, HDF5_ROOT) is found the
# same way as Debian's packages (scripts/install-deps.sh installs those).
#
# Required: MPI (its C interface), zlib, nlohmann-json, Boost.Program_options, threads.
# Optional, each chosen by Z2F_WITH_<NAME> = AUTO (used when found), ON (required) or OFF, and
# replaced by a fallback that the test suite runs (the configure summary names which is built):
#   LIBURING  the io_uring engine of the direct-I/O writer and reader; without it, the threaded
#             engine, which is also what a kernel that refuses io_uring gets at run time
#   ISAL      ISA-L's CRC-32 (~10x zlib's, docs/io-engine.md); without it, zlib's crc32
#   HDF5      the HDF5 writer module behind --format hdf5; without it that format is refused
#             with a message naming -DZ2F_WITH_HDF5=ON
#
# Z2F_STATIC_DEPS links every dependency but MPI and the C library into the tools (the library
# becomes static, as do zlib, Boost, ISA-L, liburing and the C++ runtime), so that a compute node
# needs nothing installed but the MPI library the tools were built with. HDF5 output is not
# built then: Debian's static HDF5 needs curl, OpenSSL and Kerberos linked statically too.
option(Z2F_STATIC_DEPS "Link every dependency except MPI and libc statically (tools only)" OFF)

# Declares Z2F_WITH_<name> and normalises it to AUTO, ON or OFF in the caller's scope (any of
# CMake's spellings of true and false is accepted).
function(z2f_feature_option name description)
    set(Z2F_WITH_${name} AUTO CACHE STRING "${description}: AUTO (when found), ON (required) or OFF")
    set_property(CACHE Z2F_WITH_${name} PROPERTY STRINGS AUTO ON OFF)
    string(TOUPPER "${Z2F_WITH_${name}}" value)
    if(NOT value STREQUAL "AUTO")
        if(value)
            set(value ON)
        else()
            set(value OFF)
        endif()
    endif()
    set(Z2F_WITH_${name} ${value} PARENT_SCOPE)
endfunction()

# One line of the configure summary (cmake/Summary.cmake prints them in order).
function(z2f_summary label text)
    string(REPLACE ";" ", " text "${text}")
    set_property(GLOBAL APPEND PROPERTY Z2F_SUMMARY_LINES "${label}|${text}")
endfunction()

# Stops the configuration when a dependency asked for with ON is missing; otherwise records the
# fallback in the summary.
function(z2f_feature_missing name why fallback)
    if(Z2F_WITH_${name} STREQUAL "ON")
        message(FATAL_ERROR "Z2F_WITH_${name}=ON, but ${why}. Install it (scripts/install-deps.sh "
                            "on Debian), point CMAKE_PREFIX_PATH at it, or configure with "
                            "-DZ2F_WITH_${name}=OFF for the fallback: ${fallback}")
    endif()
endfunction()

z2f_feature_option(LIBURING "liburing: the io_uring engine of direct I/O")
z2f_feature_option(ISAL "ISA-L: its CRC-32")
z2f_feature_option(HDF5 "HDF5: --format hdf5")

# Static archives only, when the tools are to carry their dependencies.
if(Z2F_STATIC_DEPS)
    set(Boost_USE_STATIC_LIBS ON)
    find_library(Z2F_ZLIB_STATIC_LIBRARY NAMES libz.a)
    if(NOT Z2F_ZLIB_STATIC_LIBRARY)
        message(FATAL_ERROR "Z2F_STATIC_DEPS=ON needs zlib's static archive libz.a (zlib1g-dev on "
                            "Debian, zlib-static on RHEL/Rocky)")
    endif()
    # FindZLIB takes the library it is given.
    set(ZLIB_LIBRARY "${Z2F_ZLIB_STATIC_LIBRARY}" CACHE FILEPATH "zlib (static)" FORCE)
endif()

find_package(MPI REQUIRED COMPONENTS C)
find_package(ZLIB REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(Boost 1.74 REQUIRED COMPONENTS program_options)
# The copy engine's write-behind helper thread (io/write_behind.cpp).
find_package(Threads REQUIRED)

if(Z2F_STATIC_DEPS)
    set(_z2f_link_kind "static ")
else()
    set(_z2f_link_kind "")
endif()

# An optional dependency found by header and library (Debian ships no CMake config for these,
# and their pkg-config files are not in every release): its static archive under
# Z2F_STATIC_DEPS. Sets <var> in the caller to the library's path, or to "" when either is missing.
function(z2f_find_header_and_library var prefix header library)
    find_path(${prefix}_INCLUDE_DIR ${header})
    if(Z2F_STATIC_DEPS)
        find_library(${prefix}_STATIC_LIBRARY NAMES lib${library}.a)
        set(found "${${prefix}_STATIC_LIBRARY}")
    else()
        find_library(${prefix}_LIBRARY NAMES ${library})
        set(found "${${prefix}_LIBRARY}")
    endif()
    if(NOT ${prefix}_INCLUDE_DIR OR NOT found)
        set(found "")
    endif()
    set(${var} "${found}" PARENT_SCOPE)
endfunction()

# The imported target of a library found by z2f_find_header_and_library.
function(z2f_import_library target prefix location)
    add_library(${target} UNKNOWN IMPORTED GLOBAL)
    set_target_properties(${target} PROPERTIES
        IMPORTED_LOCATION ${location} INTERFACE_INCLUDE_DIRECTORIES ${${prefix}_INCLUDE_DIR})
endfunction()

# ISA-L (libisal-dev): CRC-32 with carry-less multiplication. Debian ships no static archive of
# it: a static build there uses zlib's crc32.
set(Z2F_HAVE_ISAL OFF)
if(NOT Z2F_WITH_ISAL STREQUAL "OFF")
    z2f_find_header_and_library(_z2f_isal ISAL isa-l/crc.h isal)
    if(_z2f_isal)
        set(Z2F_HAVE_ISAL ON)
        z2f_import_library(ISAL::isal ISAL ${_z2f_isal})
        z2f_summary("CRC-32" "ISA-L (${_z2f_isal})")
    else()
        z2f_feature_missing(ISAL "no ${_z2f_link_kind}ISA-L was found (isa-l/crc.h, libisal)"
                            "zlib's crc32")
        z2f_summary("CRC-32" "zlib's crc32 (no ${_z2f_link_kind}ISA-L found, so slower input checks)")
    endif()
else()
    z2f_summary("CRC-32" "zlib's crc32 (Z2F_WITH_ISAL=OFF)")
endif()

# liburing (liburing-dev): the io_uring engine (io/uring_async_io.cpp), which uses liburing 2.3's
# API (64-bit user data, SINGLE_ISSUER rings): an older one counts as missing.
set(Z2F_HAVE_LIBURING OFF)
set(_z2f_uring_old "")
if(NOT Z2F_WITH_LIBURING STREQUAL "OFF")
    z2f_find_header_and_library(_z2f_uring LIBURING liburing.h uring)
    if(_z2f_uring)
        set(CMAKE_REQUIRED_INCLUDES ${LIBURING_INCLUDE_DIR})
        set(CMAKE_REQUIRED_QUIET ON)
        check_symbol_exists(IORING_SETUP_SINGLE_ISSUER liburing.h Z2F_LIBURING_HAS_SINGLE_ISSUER)
        check_symbol_exists(io_uring_cqe_get_data64 liburing.h Z2F_LIBURING_HAS_DATA64)
        unset(CMAKE_REQUIRED_INCLUDES)
        unset(CMAKE_REQUIRED_QUIET)
        if(NOT Z2F_LIBURING_HAS_SINGLE_ISSUER OR NOT Z2F_LIBURING_HAS_DATA64)
            set(_z2f_uring "")
            set(_z2f_uring_old " 2.3 or newer")
        endif()
    endif()
    if(_z2f_uring)
        set(Z2F_HAVE_LIBURING ON)
        z2f_import_library(liburing::liburing LIBURING ${_z2f_uring})
        z2f_summary("direct I/O engine" "io_uring (${_z2f_uring}), threads where the kernel refuses it")
    else()
        z2f_feature_missing(LIBURING
                            "no ${_z2f_link_kind}liburing${_z2f_uring_old} was found (liburing.h, liburing)"
                            "the threaded engine")
        z2f_summary("direct I/O engine" "threads (no ${_z2f_link_kind}liburing${_z2f_uring_old} found)")
    endif()
else()
    z2f_summary("direct I/O engine" "threads (Z2F_WITH_LIBURING=OFF)")
endif()

# HDF5: only its serial C API is used (datasets are laid out by the library, their bytes written by
# our own copy engine), so the serial build is preferred: it goes with any MPI. An MPI build of HDF5
# works too, provided it was built with the same MPI as this build.
set(Z2F_HAVE_HDF5 OFF)
if(Z2F_STATIC_DEPS)
    if(Z2F_WITH_HDF5 STREQUAL "ON")
        message(FATAL_ERROR "Z2F_WITH_HDF5=ON and Z2F_STATIC_DEPS=ON do not go together: the HDF5 "
                            "writer is a module that links the shared library. Build HDF5 output "
                            "without Z2F_STATIC_DEPS")
    endif()
    z2f_summary("HDF5 output" "no: --format hdf5 is refused (Z2F_STATIC_DEPS=ON)")
elseif(NOT Z2F_WITH_HDF5 STREQUAL "OFF")
    set(HDF5_PREFER_PARALLEL FALSE)
    find_package(HDF5 COMPONENTS C)
    if(HDF5_FOUND)
        set(Z2F_HAVE_HDF5 ON)
        add_library(z2f_hdf5 INTERFACE)
        target_include_directories(z2f_hdf5 SYSTEM INTERFACE ${HDF5_C_INCLUDE_DIRS} ${HDF5_INCLUDE_DIRS})
        target_link_libraries(z2f_hdf5 INTERFACE ${HDF5_C_LIBRARIES} ${HDF5_LIBRARIES})
        target_compile_definitions(z2f_hdf5 INTERFACE ${HDF5_DEFINITIONS} ${HDF5_C_DEFINITIONS})
        set(_z2f_hdf5_kind "serial")
        if(HDF5_IS_PARALLEL)
            set(_z2f_hdf5_kind "MPI build: it must be built with this build's MPI")
        endif()
        z2f_summary("HDF5 output" "yes, HDF5 ${HDF5_VERSION} (${_z2f_hdf5_kind})")
    else()
        z2f_feature_missing(HDF5 "HDF5's C library was not found (set HDF5_ROOT)"
                            "--format hdf5 refused")
        z2f_summary("HDF5 output" "no: --format hdf5 is refused (HDF5 not found)")
    endif()
else()
    z2f_summary("HDF5 output" "no: --format hdf5 is refused (Z2F_WITH_HDF5=OFF)")
endif()

# What launches the ranks: Open MPI's mpiexec takes flags that MPICH's (Hydra) refuses.
set(Z2F_MPI_VENDOR "unknown")
if(MPIEXEC_EXECUTABLE)
    execute_process(COMMAND ${MPIEXEC_EXECUTABLE} --version
        OUTPUT_VARIABLE _z2f_mpiexec_version ERROR_VARIABLE _z2f_mpiexec_version
        RESULT_VARIABLE _z2f_mpiexec_rc TIMEOUT 30)
    if(_z2f_mpiexec_version MATCHES "Open MPI|OpenRTE")
        set(Z2F_MPI_VENDOR "Open MPI")
    elseif(_z2f_mpiexec_version MATCHES "HYDRA|Intel\\(R\\) MPI")
        set(Z2F_MPI_VENDOR "MPICH")
    endif()
endif()
set(_z2f_mpi_text "MPI ${MPI_C_VERSION}, ${MPI_C_LIBRARIES}")
if(MPI_C_LIBRARY_VERSION_STRING)
    string(REGEX REPLACE "[\r\n].*" "" _z2f_mpi_first_line "${MPI_C_LIBRARY_VERSION_STRING}")
    set(_z2f_mpi_text "${_z2f_mpi_first_line} (${MPI_C_LIBRARIES})")
endif()
z2f_summary("MPI" "${_z2f_mpi_text}")
z2f_summary("mpiexec" "${MPIEXEC_EXECUTABLE} (${Z2F_MPI_VENDOR})")

if(Z2F_BUILD_TESTS)
    find_package(GTest REQUIRED)
    include(GoogleTest)
    # Launcher flags for the MPI tests. Open MPI refuses root without --allow-run-as-root and more
    # ranks than cores (3-4 ranks on two cores) without --oversubscribe; Hydra allows both as is.
    set(Z2F_MPIEXEC_FLAGS "")
    if(Z2F_MPI_VENDOR STREQUAL "Open MPI")
        set(Z2F_MPIEXEC_FLAGS --oversubscribe)
        execute_process(COMMAND id -u OUTPUT_VARIABLE _z2f_uid OUTPUT_STRIP_TRAILING_WHITESPACE)
        if(_z2f_uid STREQUAL "0")
            list(APPEND Z2F_MPIEXEC_FLAGS --allow-run-as-root)
        endif()
    endif()
    string(REPLACE ";" " " Z2F_MPIEXEC_FLAGS_STRING "${Z2F_MPIEXEC_FLAGS}")
endif()
