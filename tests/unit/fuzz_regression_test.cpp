// Inputs that broke a reader under the fuzz targets (tests/fuzz), fed through the production API
// they broke: each must now end in a clean z2f::Error naming the problem. The same files live
// in tests/fuzz/regressions/<target>/, where the fuzz_replay_* tests also run them through the
// harnesses' own checks.
#include <cstddef>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "checkpoint/states_reader.hpp"
#include "common/errors.hpp"
#include "container/torch_file.hpp"
#include "pickle/machine.hpp"
#include "pickle/printer.hpp"
#include "support/test_files.hpp"
#include "support/zip_builder.hpp"

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

// The message of the input error `body` throws, or "" when it returns.
std::string input_error(const std::function<void()>& body) {
    try {
        body();
    } catch (const Error& error) {
        EXPECT_EQ(error.kind(), ErrorKind::kInput);
        return error.what();
    }
    return "";
}

// `pickle` as the data.pkl of a torch zip written in `dir`, as the interpreter harness wraps
// its pickle inputs (these need no storage records).
container::TorchFile open_wrapped(const testing::TempDir& dir, std::span<const std::byte> pickle) {
    std::vector<testing::ZipBuilderEntry> entries = {
        {"archive/data.pkl", std::vector<std::byte>(pickle.begin(), pickle.end()), 0, {}, 0, true},
        {"archive/byteorder", testing::bytes_of("little"), 0, {}, 0, true},
        {"archive/version", testing::bytes_of("3\n"), 0, {}, 0, true},
    };
    testing::write_file_bytes(dir.file("wrapped.pt"), testing::build_zip(entries));
    return container::TorchFile::open(dir.file("wrapped.pt"));
}

// --- tiny pickle assembler -----------------------------------------------------------------
std::string le32(std::uint32_t value) {
    std::string out;
    for (int i = 0; i < 4; ++i) {
        out += static_cast<char>((value >> (8 * i)) & 0xFF);
    }
    return out;
}
std::string u(const std::string& text) {  // BINUNICODE
    return "X" + le32(static_cast<std::uint32_t>(text.size())) + text;
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

// The same attack at a size where the old machine asked for about 150 GB: now a quick error
// (a regression shows as an out-of-memory abort).
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
    std::string message = pickle_error(as_bytes(pickle));
    EXPECT_NE(message.find("refers to the same values over and over"), std::string::npos)
        << message;
}

// Copying each value once, as honest pickles do, stays within the bound.
TEST(FuzzRegression, PickleSingleCopiesOfLargeValuesAreAccepted) {
    const std::size_t items = 100000;
    std::string pickle = "\x80\x02"s + "c__builtin__\nset\n" + "(N";
    pickle += std::string(items - 1, '2') + "l\x85R.";  // set([None] * items)
    EXPECT_EQ(pickle_error(as_bytes(pickle)), "");
}

// --- pickle printer: nesting the machine's cap does not see (src/pickle/printer.cpp) --------
//
// Each level is an empty list, memoised, appended to the previous level and only then filled:
// every list was built at depth 1, so the machine's nesting cap never fired, but the path from
// the root is 5000 levels long and the printer, asked for any depth as
// `zero2fp32-inspect --depth N` allows, recursed until the stack overflowed. Not an error: the
// printer now stops at kMaxPrintDepth levels and says so.

std::string print_deep(std::span<const std::byte> bytes) {
    pickle::Document document = pickle::parse_pickle(bytes, "regression.pkl");
    pickle::PrintOptions options;
    options.max_depth = std::numeric_limits<std::uint32_t>::max();
    std::ostringstream out;
    pickle::print_value(out, document.root(), options);
    return out.str();
}

TEST(FuzzRegression, PrinterStopsAtItsDepthLimitOnListsFilledAfterNesting) {
    std::string text = print_deep(regression_bytes("pickle", "list-filled-after-nesting.pkl"));
    EXPECT_NE(text.find("<list: nesting too deep to print>"), std::string::npos);
    std::string deepest(2 * pickle::kMaxPrintDepth, ' ');
    EXPECT_NE(text.find("\n" + deepest + "[0] <list: nesting too deep"), std::string::npos);
}

// 100000 levels (600 KB) overflowed the stack of release builds too.
TEST(FuzzRegression, PrinterStopsAtItsDepthLimitAtScale) {
    std::string pickle = "\x80\x02]q\x00q\x01"s + "0";  // root list in memo 0 and 1
    for (int i = 0; i < 100000; ++i) {
        pickle += "h\x01]q\x01"s + "a0";  // memo[1].append(new list); memo[1] = it
    }
    pickle += "h\x00."s;
    EXPECT_NE(print_deep(as_bytes(pickle)).find("nesting too deep to print"), std::string::npos);
}

// --- interpreter: a pickle graph walked as a tree (src/checkpoint/field.cpp, Field::charge) ---
//
// One memoised value referenced over and over (the same dict as every param_shapes group, the
// same dict as every ds_zero_partition_groups entry) multiplied the interpreter's work: these
// 25 and 56 KB pickles ran past the fuzzer's 10 s limit, on their way to gigabytes.

TEST(FuzzRegression, InterpreterParamShapesOfOneSharedGroupAreBounded) {
    testing::TempDir dir;
    container::TorchFile file = open_wrapped(
        dir, regression_bytes("checkpoint_interpreter", "param-shapes-shared-group.pkl"));
    std::string message = input_error(
        [&] { checkpoint::read_model_states(file, 0, checkpoint::ModelFileScope::kFull); });
    EXPECT_NE(message.find("exceeds the interpretation budget"), std::string::npos) << message;
    EXPECT_NE(message.find("param_shapes"), std::string::npos) << message;
}

TEST(FuzzRegression, InterpreterPartitionGroupsOfOneSharedDictAreBounded) {
    testing::TempDir dir;
    container::TorchFile file = open_wrapped(
        dir, regression_bytes("checkpoint_interpreter", "partition-groups-shared-dict.pkl"));
    std::string message = input_error([&] { checkpoint::read_optim_states(file, 0); });
    EXPECT_NE(message.find("exceeds the interpretation budget"), std::string::npos) << message;
    EXPECT_NE(message.find("ds_zero_partition_groups"), std::string::npos) << message;
}

// param_shapes = [G] * 30000, G a dict of 30000 entries: 9 * 10^8 shapes from a 150 KB pickle.
// Before the budget this ran for hours toward tens of GB; a regression shows as a CTest
// timeout or an out-of-memory abort.
TEST(FuzzRegression, InterpreterSharedValuesStayBoundedAtScale) {
    const std::size_t entries = 30000;
    const std::size_t groups = 30000;
    std::string group = "}q\x01"s + u("w") + "q\x02K\x03\x85q\x03s(";
    for (std::size_t i = 1; i < entries; ++i) {
        group += "h\x02h\x03"s;
    }
    group += "u";
    std::string pickle = "\x80\x02}q\x00("s + u("module") + "}" + u("param_shapes") + "(" + group +
                         std::string(groups - 1, '2') + "lu.";
    testing::TempDir dir;
    container::TorchFile file = open_wrapped(dir, as_bytes(pickle));
    std::string message = input_error(
        [&] { checkpoint::read_model_states(file, 0, checkpoint::ModelFileScope::kFull); });
    EXPECT_NE(message.find("exceeds the interpretation budget"), std::string::npos) << message;
}

// An honest model-states pickle with 20000 parameters of 100-character names, each name also
// fetched from the memo by shared_params (the way pickle shares a str object), stays far
// inside the budget.
TEST(FuzzRegression, InterpreterBudgetAcceptsLargeHonestPickles) {
    const std::uint32_t params = 20000;
    std::string shapes = "ccollections\nOrderedDict\n)R(";
    std::string shared = "}(";
    for (std::uint32_t i = 0; i < params; ++i) {
        std::string name = "model.layers." + std::to_string(i) + ".";
        name += std::string(100 - name.size(), 'w');
        shapes += u(name) + "r" + le32(i) + "K\x07M\x00\x01\x86"s;  // name: (7, 256)
        shared += "j" + le32(i) + "j" + le32(i);                    // name: name
    }
    shapes += "u";
    shared += "u";
    std::string pickle = "\x80\x02}("s + u("module") + "}" + u("buffer_names") + "]" +
                         u("param_shapes") + "]" + shapes + "a" + u("shared_params") + shared +
                         "u.";
    testing::TempDir dir;
    container::TorchFile file = open_wrapped(dir, as_bytes(pickle));
    checkpoint::ModelStatesInfo info =
        checkpoint::read_model_states(file, 0, checkpoint::ModelFileScope::kFull);
    ASSERT_TRUE(info.param_shapes.has_value());
    ASSERT_EQ(info.param_shapes->size(), 1u);
    EXPECT_EQ(info.param_shapes->front().size(), params);
    EXPECT_EQ(info.param_shapes->front().back().shape, (std::vector<std::uint64_t>{7, 256}));
    ASSERT_TRUE(info.shared_params.has_value());
    EXPECT_EQ(info.shared_params->size(), params);
}

}  // namespace
}  // namespace z2f
