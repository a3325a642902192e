#include "python/reader_binding.hpp"

#include <cstdint>
#include <malloc.h>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <pybind11/stl.h>

#include "common/errors.hpp"
#include "python/arguments.hpp"
#include "python/plan_objects.hpp"
#include "zero2fp32/dtype.hpp"
#include "zero2fp32/state_dict.hpp"

namespace py = pybind11;

namespace z2f::python {
namespace {

// The dtype torch calls `name` (dtype_name's inverse).
DType dtype_named(const std::string& name) {
    for (int value = 0; value <= static_cast<int>(kLastDType); ++value) {
        const auto dtype = static_cast<DType>(value);
        if (dtype_name(dtype) == name)
            return dtype;
    }
    throw_usage_error("no dtype '" + name + "'");
}

class Reader {
  public:
    Reader(const std::vector<std::string>& arguments, unsigned threads)
        : reader_(open(arguments, threads)) {}

    py::dict plan() const {
        py::dict view = plan_dict(reader_.plan());
        py::list tensors = view["tensors"];
        for (std::size_t i = 0; i < tensors.size(); ++i)
            tensors[i]["has_data"] = reader_.has_data(i);
        return view;
    }

    unsigned threads() const { return reader_.threads(); }

    // `items`: (tensor index, address, byte count, dtype name or None) tuples: the memory of
    // tensors that the caller allocated and keeps alive until read() returns (torch's
    // data_ptr(); numpy, which a buffer would need, costs a torch process 0.1 s and 20 MB to
    // import), and the dtype to read each in when it is not the plan's.
    void read(const std::vector<std::tuple<std::size_t, std::uintptr_t, std::size_t,
                                           std::optional<std::string>>>& items) {
        std::vector<TensorDestination> destinations;
        destinations.reserve(items.size());
        for (const auto& [tensor, address, size, dtype] : items) {
            if (address == 0 && size > 0)
                throw_usage_error("no memory given for tensor " + std::to_string(tensor));
            destinations.push_back(
                {tensor,
                 {reinterpret_cast<std::byte*>(address), size},
                 dtype ? std::optional<DType>(dtype_named(*dtype)) : std::nullopt});
        }
        std::optional<py::error_already_set> pending;
        auto keep_going = [&pending] {
            py::gil_scoped_acquire hold;
            if (PyErr_CheckSignals() == 0)
                return true;
            pending.emplace();  // takes the KeyboardInterrupt (or the handler's error)
            return false;
        };
        try {
            py::gil_scoped_release release;
            reader_.read(destinations, keep_going);
        } catch (const Error&) {
            if (pending)
                throw *pending;
            throw;
        }
    }

  private:
    static StateDictReader open(const std::vector<std::string>& arguments, unsigned threads) {
        const cli::ConvertRequest request = parse_arguments(arguments);
        py::gil_scoped_release release;
        return StateDictReader(request.checkpoint_dir, request.options, ReaderSettings{threads});
    }

    StateDictReader reader_;
};

}  // namespace

void bind_reader(py::module_& module) {
    // A lazy state dict's reads allocate one tensor after another; the heap keeps memory the
    // earlier ones freed (35-85 MB above the tensor in hand, reading a 201M-parameter model
    // here), which glibc's malloc_trim gives back to the kernel before the next allocation.
    module.def("release_free_memory", [] { (void)::malloc_trim(0); });
    py::class_<Reader>(module, "Reader")
        .def(py::init<const std::vector<std::string>&, unsigned>(), py::arg("arguments"),
             py::arg("threads") = 0)
        .def("plan", &Reader::plan)
        .def_property_readonly("threads", &Reader::threads)
        .def("read", &Reader::read, py::arg("items"));
}

}  // namespace z2f::python
