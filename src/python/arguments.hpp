// The Python functions' options as the command line's: zero2fp32/options.py turns keyword
// arguments into zero2fp32-mpi arguments, and they are parsed here by the command line's own
// parser (cli/command_line.hpp), so that every option means in Python what it means in a
// shell, its checks and contradictions included.
#pragma once

#include <string>
#include <vector>

#include "cli/command_line.hpp"

namespace z2f::python {

// `arguments`: CKPT_DIR OUT_DIR and options, as after the program's name. A help or version
// request is a usage error (the functions have their own documentation).
cli::ConvertRequest parse_arguments(const std::vector<std::string>& arguments);

}  // namespace z2f::python
