// zero2fp32._native, the extension under the Python package (python/zero2fp32): the library's
// plan, conversion, in-memory reader and command line, with its errors as Python exceptions.
// It needs no torch: the package's Python code allocates the tensors and hands their memory
// over (reader_binding.hpp).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "python/convert_binding.hpp"
#include "python/python_errors.hpp"
#include "python/reader_binding.hpp"
#include "zero2fp32/version.hpp"

namespace py = pybind11;

PYBIND11_MODULE(_native, module) {
    module.doc() = "zero2fp32's C++ library (use the zero2fp32 package, not this module)";
    module.attr("version") = z2f::kVersion;
    z2f::python::register_error_translation();
    module.def("convert", &z2f::python::convert, py::arg("arguments"),
               py::arg("on_message") = py::none());
    module.def("plan", &z2f::python::plan, py::arg("arguments"));
    module.def("run_command_line", &z2f::python::run_command_line, py::arg("argv"));
    z2f::python::bind_reader(module);
}
