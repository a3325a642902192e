# ASan + UBSan for the whole build when Z2F_SANITIZE is on. UBSan findings abort, so a test
# that trips one fails instead of printing a note nobody reads.
#
# The fuzz preset (Z2F_BUILD_FUZZERS) implies both sanitizers, and adds libFuzzer's coverage
# instrumentation (fuzzer-no-link) to every translation unit: without it the fuzzers would be
# guided only by branches in the harnesses, not by those of the readers they exercise. Only
# the fuzz_* executables link libFuzzer's driver (-fsanitize=fuzzer, tests/fuzz).
if(Z2F_BUILD_FUZZERS)
    if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
        message(FATAL_ERROR "Z2F_BUILD_FUZZERS needs clang (libFuzzer); use the fuzz preset")
    endif()
    add_compile_options(-fsanitize=fuzzer-no-link)
endif()
if(Z2F_SANITIZE OR Z2F_BUILD_FUZZERS)
    set(_z2f_san_flags -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
    add_compile_options(${_z2f_san_flags})
    add_link_options(${_z2f_san_flags})
endif()

# Environment for running sanitized binaries under CTest. OpenMPI's own libraries (open-pal,
# hwloc, pmix) keep allocations alive until exit; those, and only those, are suppressed.
# OMPI_MCA_mca_base_component_disable_dlclose keeps OpenMPI's components loaded at exit, so that
# their allocations show real frames (matched by tests/lsan.supp) instead of <unknown module>;
# full unwinding follows those frames through libraries built without frame pointers.
set(Z2F_SANITIZER_ENV
    "ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:detect_stack_use_after_return=0"
    "LSAN_OPTIONS=suppressions=${PROJECT_SOURCE_DIR}/tests/lsan.supp:print_suppressions=0:fast_unwind_on_malloc=0"
    "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1"
    "OMPI_MCA_mca_base_component_disable_dlclose=1")
