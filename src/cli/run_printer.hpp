// What zero2fp32-mpi prints about a finished run (rank 0): the --dry-run plan on stdout, the
// final "done" line, or the errors and the files an interrupted run left complete.
#pragma once

#include <cstdio>

#include "zero2fp32/result.hpp"

namespace z2f::cli {

void print_dry_run(std::FILE* out, const ConversionResult& result);
void print_done(std::FILE* out, const ConversionResult& result);
// The errors, then what is complete on disk (the first few names; all with verbosity > 0).
void print_failure(std::FILE* out, const ConversionError& error, int verbosity);

}  // namespace z2f::cli
