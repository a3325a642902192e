# Run by `cmake --install` (src/python/CMakeLists.txt sets the Z2F_* variables): the package
# assembled in the build tree (Z2F_PACKAGE_DIR: the sources, the extension, the library, the
# HDF5 module) copied into the directory where the prefix's Python imports from
# (python_site_dir.py), or into $Z2F_PYTHON_SITE_DIR/zero2fp32 when that is set (setup.py's
# wheel). Outside the setup.py case, a `zero_to_fp32` script for that Python goes to the
# prefix's bin/ too.

# A build of some targets only (scripts/quickstart.sh builds the tools): nothing to install.
file(GLOB _z2f_native "${Z2F_PACKAGE_DIR}/_native*.so")
if(NOT _z2f_native)
    message(STATUS "zero2fp32: the Python package is not built (target z2f_python): not installed")
    return()
endif()

if(DEFINED ENV{Z2F_PYTHON_SITE_DIR})
    set(_z2f_site "$ENV{Z2F_PYTHON_SITE_DIR}")
    set(_z2f_python "")
else()
    set(_z2f_python "${Z2F_PYTHON}")
    if(EXISTS "${CMAKE_INSTALL_PREFIX}/bin/python3")
        set(_z2f_python "${CMAKE_INSTALL_PREFIX}/bin/python3")
    endif()
    execute_process(
        COMMAND "${_z2f_python}" "${Z2F_SITE_DIR_SCRIPT}" "${CMAKE_INSTALL_PREFIX}"
        OUTPUT_VARIABLE _z2f_answer RESULT_VARIABLE _z2f_status)
    if(NOT _z2f_status EQUAL 0)
        message(FATAL_ERROR "${_z2f_python} could not say where its packages go under "
                            "${CMAKE_INSTALL_PREFIX}")
    endif()
    string(STRIP "${_z2f_answer}" _z2f_answer)
    string(REPLACE "\n" ";" _z2f_answer "${_z2f_answer}")
    list(GET _z2f_answer 0 _z2f_site)
    list(GET _z2f_answer 1 _z2f_on_path)
    if(_z2f_on_path STREQUAL "off-path")
        message(STATUS "zero2fp32: ${_z2f_python} does not import from ${_z2f_site}: "
                       "add it to PYTHONPATH")
    endif()
endif()

set(_z2f_package "$ENV{DESTDIR}${_z2f_site}/zero2fp32")
message(STATUS "Installing: ${_z2f_package} (Python package)")
file(MAKE_DIRECTORY "${_z2f_package}")
file(COPY "${Z2F_PACKAGE_DIR}/" DESTINATION "${_z2f_package}" PATTERN "__pycache__" EXCLUDE)

if(_z2f_python)
    set(_z2f_script "$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}/bin/zero_to_fp32")
    message(STATUS "Installing: ${_z2f_script}")
    file(WRITE "${_z2f_script}"
         "#!${_z2f_python}\n"
         "# zero_to_fp32.py's command line, by the zero2fp32 package.\n"
         "import sys\n"
         "from zero2fp32.zero_to_fp32 import main\n"
         "sys.exit(main())\n")
    file(CHMOD "${_z2f_script}" PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ
         GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
endif()
