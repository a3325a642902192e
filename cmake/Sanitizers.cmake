# ASan + UBSan for the whole build when Z2F_SANITIZE is on. UBSan findings abort, so a test
# that trips one fails instead of printing a note nobody reads.
if(Z2F_SANITIZE)
    set(_z2f_san_flags -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
    add_compile_options(${_z2f_san_flags})
    add_link_options(${_z2f_san_flags})
endif()

# Environment for running sanitized binaries under CTest. OpenMPI's own libraries (open-pal,
# hwloc, pmix) keep allocations alive until exit; those, and only those, are suppressed.
set(Z2F_SANITIZER_ENV
    "ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:detect_stack_use_after_return=0"
    "LSAN_OPTIONS=suppressions=${PROJECT_SOURCE_DIR}/tests/lsan.supp:print_suppressions=0"
    "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1")
