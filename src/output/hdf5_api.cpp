#include "output/hdf5_api.hpp"

#include <array>
#include <cstddef>
#include <string>
#include <vector>

#include "common/errors.hpp"

namespace z2f::output::hdf5 {
namespace {

// Entries are kept from the outermost call (the API function we called) to the innermost one
// (usually the real reason). Long stacks keep both ends.
constexpr std::size_t kOuterEntries = 2;
constexpr std::size_t kInnerEntries = 6;

// Appends `text` with line breaks and other control characters turned into spaces (HDF5 puts
// ctime() strings, newline included, into some descriptions); the message stays one line.
void append_one_line(std::string& out, const char* text) {
    for (; *text != '\0'; ++text) {
        const auto c = static_cast<unsigned char>(*text);
        out += c < 0x20 ? ' ' : *text;
    }
}

// Records "<function>: <description> (<minor message>)" for one error stack entry.
herr_t collect_entry(unsigned /*index*/, const H5E_error2_t* entry, void* client) noexcept {
    auto* entries = static_cast<std::vector<std::string>*>(client);
    try {
        std::string text;
        if (entry->func_name != nullptr) {
            append_one_line(text, entry->func_name);
            text += ": ";
        }
        append_one_line(text, entry->desc != nullptr ? entry->desc : "(no description)");
        std::array<char, 160> minor{};
        if (H5Eget_msg(entry->min_num, nullptr, minor.data(), minor.size()) > 0) {
            text += " (";
            append_one_line(text, minor.data());
            text += ")";
        }
        entries->push_back(std::move(text));
    } catch (...) {
        return -1;  // out of memory while formatting: stop the walk, keep what we have
    }
    return 0;
}

}  // namespace

void Handle::reset() noexcept {
    if (id_ >= 0 && close_ != nullptr) {
        QuietErrors quiet;
        if (close_(id_) < 0) {
            H5Eclear2(default_error_stack());
        }
    }
    id_ = H5I_INVALID_HID;
}

void Handle::close(std::string_view what) {
    if (id_ < 0) {
        return;
    }
    hid_t id = std::exchange(id_, H5I_INVALID_HID);
    check(close_(id), what);
}

void throw_error(std::string_view what) {
    std::vector<std::string> entries;
    H5Ewalk2(default_error_stack(), H5E_WALK_DOWNWARD, collect_entry, &entries);
    H5Eclear2(default_error_stack());
    std::string message = "HDF5: ";
    message += what;
    if (entries.empty()) {
        message += "; no HDF5 error stack";
    }
    for (std::size_t i = 0; i < entries.size(); ++i) {
        const bool outer = i < kOuterEntries;
        const bool inner = i + kInnerEntries >= entries.size();
        if (outer || inner) {
            message += "; ";
            message += entries[i];
        } else if (i == kOuterEntries) {
            message += "; ... " + std::to_string(entries.size() - kOuterEntries - kInnerEntries) +
                       " more ...";
        }
    }
    throw Error(ErrorKind::kInternal, std::move(message));
}

QuietErrors::QuietErrors() noexcept {
    if (H5Eget_auto2(default_error_stack(), &previous_function_, &previous_data_) >= 0) {
        restore_ = true;
    }
    H5Eset_auto2(default_error_stack(), nullptr, nullptr);
}

QuietErrors::~QuietErrors() {
    if (restore_) {
        H5Eset_auto2(default_error_stack(), previous_function_, previous_data_);
    }
}

}  // namespace z2f::output::hdf5
