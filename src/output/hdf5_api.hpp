// RAII handles and error plumbing over the HDF5 C API, for the HDF5 output code only.
//
// Every hid_t we open lives in a `Handle` that closes it with the matching H5?close function.
// Every status an HDF5 call returns goes through `check` / `checked`, which turn a failure into
// a z2f::Error whose message is HDF5's own error stack (walked innermost last, so the message
// reads from "what we asked for" to "why the library refused"). HDF5's habit of printing that
// stack to stderr is switched off for the duration of our calls by `QuietErrors`.
//
// This header includes <hdf5.h>; it must stay private to src/output (the library links HDF5
// privately, and nothing outside the HDF5 writer needs it).
#pragma once

#include <string_view>
#include <utility>

#include <hdf5.h>

namespace z2f::output::hdf5 {

// HDF5 spells several constants as macros containing C-style casts (H5P_DEFAULT is
// `(hid_t)0` in 1.10, HADDR_UNDEF is a double cast). They are named here, once, so that our
// own code stays free of old-style casts.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wold-style-cast"
inline hid_t default_plist() noexcept {
    return H5P_DEFAULT;
}
inline hid_t all_selection() noexcept {
    return H5S_ALL;
}
inline hid_t default_error_stack() noexcept {
    return H5E_DEFAULT;
}
inline haddr_t undefined_address() noexcept {
    return HADDR_UNDEF;
}
inline unsigned create_truncate_flag() noexcept {
    return H5F_ACC_TRUNC;
}
inline unsigned read_only_flag() noexcept {
    return H5F_ACC_RDONLY;
}
#pragma GCC diagnostic pop

using CloseFunction = herr_t (*)(hid_t);

// Owns one HDF5 identifier. Move-only; closing errors in the destructor are ignored (the
// explicit `close()` reports them).
class Handle {
  public:
    Handle() = default;
    Handle(hid_t id, CloseFunction closer) noexcept : id_(id), close_(closer) {}
    ~Handle() { reset(); }
    Handle(Handle&& other) noexcept
        : id_(std::exchange(other.id_, H5I_INVALID_HID)), close_(other.close_) {}
    Handle& operator=(Handle&& other) noexcept {
        if (this != &other) {
            reset();
            id_ = std::exchange(other.id_, H5I_INVALID_HID);
            close_ = other.close_;
        }
        return *this;
    }
    Handle(const Handle&) = delete;
    Handle& operator=(const Handle&) = delete;

    hid_t get() const noexcept { return id_; }
    bool valid() const noexcept { return id_ >= 0; }

    // Closes now and throws (with `what` in the message) if HDF5 reports an error. H5Fclose is
    // where the library flushes its metadata, so its status matters.
    void close(std::string_view what);

  private:
    void reset() noexcept;

    hid_t id_ = H5I_INVALID_HID;
    CloseFunction close_ = nullptr;
};

// Throws a z2f::Error (kind kInternal) built from `what` and HDF5's current error stack, then
// clears the stack.
[[noreturn]] void throw_error(std::string_view what);

inline void check(herr_t status, std::string_view what) {
    if (status < 0) {
        throw_error(what);
    }
}

// For calls returning an htri_t (true / false / negative on error).
inline bool check_tri(htri_t status, std::string_view what) {
    if (status < 0) {
        throw_error(what);
    }
    return status > 0;
}

inline Handle checked(hid_t id, CloseFunction closer, std::string_view what) {
    if (id < 0) {
        throw_error(what);
    }
    return Handle(id, closer);
}

// Switches off HDF5's automatic error printing on the default stack for its lifetime and
// restores the previous handler afterwards. Nests.
class QuietErrors {
  public:
    QuietErrors() noexcept;
    ~QuietErrors();
    QuietErrors(const QuietErrors&) = delete;
    QuietErrors& operator=(const QuietErrors&) = delete;

  private:
    H5E_auto2_t previous_function_ = nullptr;
    void* previous_data_ = nullptr;
    bool restore_ = false;
};

}  // namespace z2f::output::hdf5
