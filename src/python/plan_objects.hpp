// The library's plans and results as plain Python values (dicts, lists, tuples, strings,
// numbers), which zero2fp32/converter.py wraps in dataclasses. Enums become the names the
// command line and the run summary use (safetensors, float32, buffer, keep, ...).
#pragma once

#include <pybind11/pybind11.h>

#include "zero2fp32/plan.hpp"
#include "zero2fp32/result.hpp"

namespace z2f::python {

pybind11::dict plan_dict(const ConversionPlan& plan);
pybind11::dict result_dict(const ConversionResult& result);

}  // namespace z2f::python
