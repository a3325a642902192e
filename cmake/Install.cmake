# `cmake --install`: the tools, the library, its public headers and a CMake package, so that
#   find_package(zero2fp32 CONFIG REQUIRED)
#   target_link_libraries(app PRIVATE zero2fp32::zero2fp32)
# works against the installed prefix (tests/install checks it).
#
# With Z2F_STATIC_DEPS only the tools are installed: they carry the library and every dependency
# but MPI and libc, and a static library would need its dependencies' archives in the consumer.
include(CMakePackageConfigHelpers)

install(TARGETS zero2fp32-mpi zero2fp32-inspect zero2fp32-synth
    RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
if(Z2F_STATIC_DEPS)
    return()
endif()

set(Z2F_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/zero2fp32)

install(TARGETS zero2fp32 EXPORT zero2fp32Targets
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
    INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# The HDF5 writer module, loaded from the library's directory by --format hdf5.
if(Z2F_HAVE_HDF5)
    install(TARGETS zero2fp32_hdf5 LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/zero2fp32
    DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.hpp")
install(FILES ${PROJECT_BINARY_DIR}/src/include/zero2fp32/version.hpp
    DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/zero2fp32)
install(EXPORT zero2fp32Targets NAMESPACE zero2fp32:: DESTINATION ${Z2F_CMAKE_DIR})

configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/zero2fp32Config.cmake.in
    ${PROJECT_BINARY_DIR}/zero2fp32Config.cmake INSTALL_DESTINATION ${Z2F_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/zero2fp32ConfigVersion.cmake
    VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/zero2fp32Config.cmake
    ${PROJECT_BINARY_DIR}/zero2fp32ConfigVersion.cmake DESTINATION ${Z2F_CMAKE_DIR})
