# Writes the same synthetic checkpoint twice, by one process and by `mpiexec -n RANKS`, and
# requires byte-identical folders (every file's SHA-256). Run with cmake -P and
#   -DSYNTH=<zero2fp32-synth> -DMPIEXEC=<mpiexec> -DMPIEXEC_FLAGS=<a|b> -DRANKS=<n>
#   -DARGS=<options separated by |> -DWORK=<scratch folder>
# (| separates list items: add_test cannot pass ';' through -D).
string(REPLACE "|" ";" args "${ARGS}")
string(REPLACE "|" ";" flags "${MPIEXEC_FLAGS}")
file(REMOVE_RECURSE "${WORK}")

execute_process(COMMAND "${SYNTH}" ${args} --quiet "${WORK}/single" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
    message(FATAL_ERROR "single-process zero2fp32-synth failed: ${rc}")
endif()
execute_process(COMMAND "${MPIEXEC}" ${flags} -n ${RANKS} "${SYNTH}" ${args} "${WORK}/mpi"
    RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
    message(FATAL_ERROR "mpiexec -n ${RANKS} zero2fp32-synth failed: ${rc}")
endif()

file(GLOB_RECURSE single_files RELATIVE "${WORK}/single" "${WORK}/single/*")
file(GLOB_RECURSE mpi_files RELATIVE "${WORK}/mpi" "${WORK}/mpi/*")
list(SORT single_files)
list(SORT mpi_files)
if(NOT single_files STREQUAL mpi_files)
    message(FATAL_ERROR "different file lists:\n  ${single_files}\n  ${mpi_files}")
endif()
list(LENGTH single_files count)
if(count LESS 3)
    message(FATAL_ERROR "only ${count} files written")
endif()
foreach(name IN LISTS single_files)
    file(SHA256 "${WORK}/single/${name}" a)
    file(SHA256 "${WORK}/mpi/${name}" b)
    if(NOT a STREQUAL b)
        message(FATAL_ERROR "${name} differs between 1 and ${RANKS} processes")
    endif()
endforeach()
message(STATUS "${count} files identical between 1 and ${RANKS} processes")
file(REMOVE_RECURSE "${WORK}")
