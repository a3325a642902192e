// The library's errors as Python exceptions: a z2f::Error becomes an instance of the class
// that zero2fp32/errors.py keeps for its kind (zero2fp32.InputError, UsageError, ...; all
// subclasses of zero2fp32.Error), carrying the kind's name and the message.
#pragma once

#include <pybind11/pybind11.h>

namespace z2f::python {

// Registers the translation with the module being built.
void register_error_translation();

}  // namespace z2f::python
