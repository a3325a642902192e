# The Python package (python/zero2fp32 and its extension, src/python; README.md "From
# Python"), chosen by Z2F_WITH_PYTHON = AUTO (built when found), ON (required) or OFF, as the
# optional dependencies are (Dependencies.cmake). It needs pybind11 (pybind11-dev) and the
# headers of the Python it is built for, Z2F_PYTHON (python3-dev); never torch. AUTO leaves it
# out of two kinds of build:
#   - with the sanitizers: an instrumented extension loads only into an interpreter started with
#     libasan preloaded, so the Python tests run in the Release build;
#   - with Z2F_STATIC_DEPS: the library is then an archive built for the tools, not for a
#     shared module.
# Sets Z2F_BUILD_PYTHON for src/ and tests/.
z2f_feature_option(PYTHON "the Python package zero2fp32 (pybind11, the Python headers)")
if(EXISTS /usr/bin/python3)
    set(_z2f_default_python /usr/bin/python3)  # Debian's, whose torch the tests use
else()
    set(_z2f_default_python python3)
endif()
set(Z2F_PYTHON ${_z2f_default_python} CACHE FILEPATH
    "The Python the package is built for (its headers and ABI)")

set(Z2F_BUILD_PYTHON OFF)
if(Z2F_WITH_PYTHON STREQUAL "OFF")
    z2f_summary("Python package" "no (Z2F_WITH_PYTHON=OFF)")
elseif(Z2F_STATIC_DEPS)
    if(Z2F_WITH_PYTHON STREQUAL "ON")
        message(FATAL_ERROR "Z2F_WITH_PYTHON=ON and Z2F_STATIC_DEPS=ON do not go together: the "
                            "static library is built for the tools, not for a Python extension")
    endif()
    z2f_summary("Python package" "no (Z2F_STATIC_DEPS=ON)")
elseif(Z2F_SANITIZE AND Z2F_WITH_PYTHON STREQUAL "AUTO")
    z2f_summary("Python package" "no (sanitizer build; Z2F_WITH_PYTHON=ON builds it)")
else()
    set(Python3_EXECUTABLE ${Z2F_PYTHON})
    find_package(Python3 QUIET COMPONENTS Interpreter Development.Module)
    if(Python3_FOUND)
        find_package(pybind11 2.6 CONFIG QUIET)
    endif()
    if(Python3_FOUND AND pybind11_FOUND)
        set(Z2F_BUILD_PYTHON ON)
        z2f_summary("Python package"
                    "yes, Python ${Python3_VERSION} (${Python3_EXECUTABLE}), pybind11 ${pybind11_VERSION}")
    else()
        z2f_feature_missing(PYTHON "pybind11 or the headers of ${Z2F_PYTHON} were not found"
                            "no Python package")
        z2f_summary("Python package" "no (pybind11-dev or the headers of ${Z2F_PYTHON} not found)")
    endif()
endif()
