// Test-only: a tiny symbolic pickle machine that turns the pickles our writer emits back into a
// tree, and renders that tree the way Python's repr would, so tests can compare whole values
// as readable strings. It knows the protocol-2 opcodes of pickle_writer.hpp and nothing else;
// it executes nothing (GLOBAL, REDUCE, NEWOBJ, BUILD and BINPERSID become nodes). Malformed
// input throws std::runtime_error naming the offset.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace z2f::test {

struct PyNode;
using PyRef = std::shared_ptr<PyNode>;

struct PyNode {
    enum class Kind {
        kNone,
        kBool,
        kInt,
        kFloat,
        kStr,
        kTuple,
        kList,
        kDict,
        kGlobal,
        kCall,
        kNewObj,
        kPersId
    };
    Kind kind = Kind::kNone;
    std::int64_t integer = 0;  // kBool (0/1), kInt
    double real = 0.0;         // kFloat
    std::string text;          // kStr, module of kGlobal
    std::string name;          // name of kGlobal
    // kTuple/kList elements; kDict items flattened (key, value, ...); kCall/kNewObj:
    // [callable, args]; kPersId: [id].
    std::vector<PyRef> items;
    // Items added to a kCall/kNewObj object by SETITEM(S) (an OrderedDict), flattened.
    std::vector<PyRef> dict_items;
    PyRef state;  // BUILD argument
};

// Runs the pickle; when `opcode_counts` is given, counts every opcode executed.
PyRef load_pickle(std::span<const std::byte> data,
                  std::map<std::uint8_t, std::size_t>* opcode_counts = nullptr);

// Python-like repr: None, True, 3, 1.5, 'text', (1,), [1, 2], {'a': 1}, torch.Size, calls as
// module.name(args...), OrderedDict items as collections.OrderedDict(){'a': 1}, BUILD as
// obj.__setstate__(state), persistent ids as persid(...).
std::string repr(const PyRef& node);

}  // namespace z2f::test
