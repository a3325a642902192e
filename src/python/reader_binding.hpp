// z2f::StateDictReader for Python (zero2fp32/state_dict.py): the plan as plain values, and
// read() of (tensor index, address, byte count) triples: the memory of tensors that Python
// allocated (torch.empty, data_ptr()), so the extension needs no torch. The reader's threads
// fill them with the GIL released, while the calling thread checks for Ctrl-C every 50 ms (a
// KeyboardInterrupt stops the threads and is raised).
#pragma once

#include <pybind11/pybind11.h>

namespace z2f::python {

void bind_reader(pybind11::module_& module);

}  // namespace z2f::python
