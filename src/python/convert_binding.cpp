#include "python/convert_binding.hpp"

#include <csignal>
#include <cstdio>
#include <exception>
#include <optional>

#include <mpi.h>

#include "cli/run_main.hpp"
#include "io/signals.hpp"
#include "python/arguments.hpp"
#include "python/plan_objects.hpp"
#include "zero2fp32/mpi.hpp"

namespace py = pybind11;

namespace z2f::python {
namespace {

// Messages to a Python callable. The library calls it on the converting thread, which holds
// no GIL while converting.
class CallbackObserver : public Observer {
  public:
    explicit CallbackObserver(const py::object& callback) : callback_(callback) {}

    void message(MessageLevel level, std::string_view text) override {
        if (callback_.is_none())
            return;
        py::gil_scoped_acquire hold;
        const char* name = level == MessageLevel::kWarning ? "warning"
                           : level == MessageLevel::kInfo  ? "info"
                                                           : "verbose";
        try {
            callback_(name, std::string(text));
        } catch (py::error_already_set& error) {
            // A broken logger must not break the conversion: Python reports it as unraisable.
            error.discard_as_unraisable("zero2fp32 message callback");
        }
    }

  private:
    const py::object& callback_;
};

// What a termination signal that the converter recorded means for the interpreter, once its
// handlers are back: Ctrl-C becomes a pending KeyboardInterrupt, SIGTERM is raised again for
// the interpreter's own disposition.
void hand_over(int signal) {
    if (signal == SIGINT)
        PyErr_SetInterrupt();
    else if (signal == SIGTERM)
        std::raise(SIGTERM);
}

}  // namespace

py::dict convert(const std::vector<std::string>& arguments, const py::object& on_message) {
    const cli::ConvertRequest request = parse_arguments(arguments);
    CallbackObserver observer(on_message);
    std::optional<ConversionResult> result;
    std::exception_ptr error;
    int signal = 0;
    {
        py::gil_scoped_release release;
        io::SavedSignalHandlers saved;
        try {
            // MPI_COMM_SELF: this process alone, even when its host started MPI.
            result = z2f::convert(request.checkpoint_dir, request.output_dir, request.options,
                                  MPI_COMM_SELF, &observer);
        } catch (...) {
            error = std::current_exception();
        }
        signal = io::termination_signal();
        io::clear_termination_signal();
    }
    if (error)
        std::rethrow_exception(error);
    hand_over(signal);
    return result_dict(*result);
}

py::dict plan(const std::vector<std::string>& arguments) {
    const cli::ConvertRequest request = parse_arguments(arguments);
    std::optional<ConversionPlan> planned;
    {
        py::gil_scoped_release release;
        planned = plan_conversion(request.checkpoint_dir, request.options);
    }
    return plan_dict(*planned);
}

int run_command_line(const std::vector<std::string>& argv) {
    std::vector<char*> pointers;
    std::vector<std::string> copies = argv;
    for (std::string& argument : copies)
        pointers.push_back(argument.data());
    pointers.push_back(nullptr);
    py::gil_scoped_release release;
    io::SavedSignalHandlers saved;
    const int code =
        cli::run_main(static_cast<int>(copies.size()), pointers.data(), cli::MpiUse::kNever);
    std::fflush(stdout);
    std::fflush(stderr);
    // An interruption is in the exit code (3): the interpreter, about to exit with it, need not
    // be interrupted again.
    io::clear_termination_signal();
    return code;
}

}  // namespace z2f::python
