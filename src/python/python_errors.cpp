#include "python/python_errors.hpp"

#include <exception>
#include <string>

#include "zero2fp32/error.hpp"

namespace py = pybind11;

namespace z2f::python {
namespace {

const char* kind_name(ErrorKind kind) {
    switch (kind) {
        case ErrorKind::kInput:
            return "input";
        case ErrorKind::kUnsupported:
            return "unsupported";
        case ErrorKind::kIo:
            return "io";
        case ErrorKind::kUsage:
            return "usage";
        case ErrorKind::kOutput:
            return "output";
        case ErrorKind::kInterrupted:
            return "interrupted";
        case ErrorKind::kInternal:
            break;
    }
    return "internal";
}

// Sets the Python error for `error` (the GIL is held: translators run with it).
void raise_error(const Error& error) {
    try {
        py::object make = py::module_::import("zero2fp32.errors").attr("error_for_kind");
        py::object instance = make(kind_name(error.kind()), error.what());
        PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(instance.ptr())), instance.ptr());
    } catch (const py::error_already_set&) {
        // The package's module is missing (the extension imported by itself): still an error
        // that says what happened.
        const std::string text = std::string(kind_name(error.kind())) + " error: " + error.what();
        PyErr_SetString(PyExc_RuntimeError, text.c_str());
    }
}

}  // namespace

void register_error_translation() {
    py::register_exception_translator([](std::exception_ptr pointer) {
        if (!pointer)
            return;
        try {
            std::rethrow_exception(pointer);
        } catch (const Error& error) {
            raise_error(error);
        }
    });
}

}  // namespace z2f::python
