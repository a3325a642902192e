// Inputs that broke a reader under the fuzz targets (tests/fuzz), fed through the production API
// they broke: each must now end in a clean z2f::Error naming the problem. The same files live
// in tests/fuzz/regressions/<target>/, where the fuzz_replay_* tests also run them through the
// harnesses' own checks.
#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "pickle/machine.hpp"
#include "support/test_files.hpp"
#include "zero2fp32/error.hpp"

namespace z2f {
namespace {

using namespace std::string_literals;  // "..."s keeps embedded NUL bytes

std::string regression_path(const std::string& target, const std::string& name) {
    return std::string(Z2F_FUZZ_DIR) + "/regressions/" + target + "/" + name;
}

std::vector<std::byte> regression_bytes(const std::string& target, const std::string& name) {
    return testing::read_file_bytes(regression_path(target, name));
}

// The message of the input error parse_pickle throws, or "" when it parses.
std::string pickle_error(std::span<const std::byte> bytes) {
    try {
        pickle::parse_pickle(bytes, "regression.pkl");
    } catch (const Error& error) {
        EXPECT_EQ(error.kind(), ErrorKind::kInput);
        return error.what();
    }
    return "";
}

std::span<const std::byte> as_bytes(const std::string& text) {
    return std::as_bytes(std::span(text.data(), text.size()));
}

// --- pickle: copies of memoised values (src/pickle/machine.cpp, Machine::charge_copy) -------
//
// A call that copies an earlier value (set(list), STACK_GLOBAL's names, a storage's location)
// could be repeated on a memoised value for a few bytes each time: copies grew quadratically
// with the input.

TEST(FuzzRegression, PickleSetOfMemoisedListIsRefused) {
    std::string message = pickle_error(regression_bytes("pickle", "set-of-memoised-list.pkl"));
    EXPECT_NE(message.find("refers to the same values over and over"), std::string::npos)
        << message;
    EXPECT_NE(message.find("REDUCE"), std::string::npos) << message;
}

TEST(FuzzRegression, PickleStackGlobalOfMemoisedNameIsRefused) {
    std::string message =
        pickle_error(regression_bytes("pickle", "stack-global-memoised-name.pkl"));
    EXPECT_NE(message.find("refers to the same values over and over"), std::string::npos)
        << message;
    EXPECT_NE(message.find("STACK_GLOBAL"), std::string::npos) << message;
}

TEST(FuzzRegression, PickleStorageWithMemoisedLocationIsRefused) {
    std::string message = pickle_error(regression_bytes("pickle", "storage-memoised-location.pkl"));
    EXPECT_NE(message.find("refers to the same values over and over"), std::string::npos)
        << message;
    EXPECT_NE(message.find("BINPERSID"), std::string::npos) << message;
}

// The same attack at a size where the old machine asked for about 150 GB: now a quick error.
TEST(FuzzRegression, PickleCopiesOfMemoisedValuesStayLinearAtScale) {
    const std::size_t items = 500000;
    const std::size_t calls = 20000;
    std::string pickle = "\x80\x02"s + "c__builtin__\nset\nq\x00"s + "(N";
    pickle += std::string(items - 1, '2') + "lq\x01";  // a list of `items` Nones, memo 1
    const std::string call = "h\x00h\x01\x85R0"s;      // set(memo[1]), then POP
    for (std::size_t i = 0; i < calls; ++i) {
        pickle += call;
    }
    pickle += "N.";
    auto start = std::chrono::steady_clock::now();
    std::string message = pickle_error(as_bytes(pickle));
    EXPECT_NE(message.find("refers to the same values over and over"), std::string::npos)
        << message;
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
}

// Copying each value once, as honest pickles do, stays within the bound.
TEST(FuzzRegression, PickleSingleCopiesOfLargeValuesAreAccepted) {
    const std::size_t items = 100000;
    std::string pickle = "\x80\x02"s + "c__builtin__\nset\n" + "(N";
    pickle += std::string(items - 1, '2') + "l\x85R.";  // set([None] * items)
    EXPECT_EQ(pickle_error(as_bytes(pickle)), "");
}

}  // namespace
}  // namespace z2f
