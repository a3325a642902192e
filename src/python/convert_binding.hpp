// The conversion from Python: zero2fp32.convert() and zero2fp32.plan() (converter.py), and the
// whole command line for `python -m zero2fp32` (__main__.py). Each runs in the interpreter's
// process alone, with the GIL released while it works.
//
// Signals: z2f::convert installs the converter's SIGINT/SIGTERM handlers, which only record the
// signal (io/signals.hpp). Here the interpreter's own handlers are put back when it returns,
// and a Ctrl-C that came too late to stop the run is handed to Python (KeyboardInterrupt); one
// that stopped it is the error of kind "interrupted", a KeyboardInterrupt too (errors.py).
#pragma once

#include <string>
#include <vector>

#include <pybind11/pybind11.h>

namespace z2f::python {

// `arguments`: CKPT_DIR OUT_DIR [options] (arguments.hpp). `on_message(level, text)` receives
// the run's messages ("warning", "info", "verbose"). Returns result_dict().
pybind11::dict convert(const std::vector<std::string>& arguments,
                       const pybind11::object& on_message);

// plan_dict() of z2f::plan_conversion; `arguments` as above (OUT_DIR is not used).
pybind11::dict plan(const std::vector<std::string>& arguments);

// zero2fp32-mpi's command line, alone in this process (cli/run_main.hpp); the exit code.
int run_command_line(const std::vector<std::string>& argv);

}  // namespace z2f::python
