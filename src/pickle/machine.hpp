// A pickle machine that builds a value tree and never executes anything.
//
// Input: the bytes of a pickle (protocols 0-5; torch.save writes protocol 2). Opcodes are
// interpreted on a symbolic stack: GLOBAL yields a reference, REDUCE / NEWOBJ / INST / OBJ of an
// unknown callable yield an inert `Instance`, and only a fixed set of callables is given
// meaning (see machine.cpp, `reduce_known`):
//
//   collections.OrderedDict()           -> ordered Dict        torch.Size(t)       -> Tuple
//   builtins.set(list) / frozenset      -> Set                 _codecs.encode(s,l1) -> Bytes
//   torch._utils._rebuild_tensor(_v2|_v3)            -> Tensor (view of a Storage)
//   torch._tensor._rebuild_from_type_v2(f, T, a, s)  -> f(*a)   (torch >= 2 wraps attributed
//                                                                tensors in it, e.g. ZeRO-3's)
//   torch._utils._rebuild_parameter(_with_state)     -> its tensor
//   BINPERSID ('storage', torch.<T>Storage, key, location, numel)      -> Storage
//
// Hostile input cannot exhaust memory or stack: every length is checked against the bytes that
// remain, every object comes from an opcode (so memory is linear in the input), MARK nesting
// and value nesting are capped, and nothing recurses on input depth. Every error names the
// source, the byte offset and the opcode. The nesting cap holds for values as they are built;
// a container filled after it was nested, or a cycle, makes longer paths through the graph,
// so code that recurses over a Document must bound its own depth (printer.hpp does).
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>

#include "pickle/value.hpp"

namespace z2f::pickle {

struct Limits {
    std::uint32_t max_nesting = 1000;  // MARK depth and container nesting
};

// Parses a whole pickle. `source` names it in error messages, e.g. "x.pt: data.pkl".
Document parse_pickle(std::span<const std::byte> data, const std::string& source,
                      const Limits& limits = {});

// A pickle read from the front of a stream of bytes that goes on after its STOP opcode (torch's
// legacy format writes several pickles back to back, then raw storage bytes).
struct PicklePrefix {
    Document document;
    std::size_t length = 0;  // bytes of the pickle, STOP included
};

// Parses the pickle `data` starts with. nullopt when `data` ends before the pickle does, so that
// the caller can offer more bytes and try again; every other malformation is an error, as in
// parse_pickle (byte offsets count from the start of `data`).
std::optional<PicklePrefix> parse_pickle_prefix(std::span<const std::byte> data,
                                                const std::string& source,
                                                const Limits& limits = {});

}  // namespace z2f::pickle
