// Pickled values kept so that they can be pickled again, unchanged: the optimizer hyper-parameters
// and scalars that a universal checkpoint's zero/optimizer_state.pt carries over from the
// original optimizer-states file (docs/universal-checkpoint.md §4).
//
// Representation: a graph of nodes stored in a vector. A node's children are indices of nodes
// stored before it, so the graph is acyclic by construction, and a node may be the child of
// several parents. Such a node is one Python object referenced from several places, exactly as
// the source pickle shared it (a memo reference: the `betas` tuple shared by every param group,
// dict keys interned by Python). Keeping that sharing lets the writer reproduce Python's memo
// decisions, and so the bytes DeepSpeed's own converter writes.
//
//   kind          payload                     children
//   kNone         -                           -
//   kBool, kInt   integer (bool: 0 / 1)       -
//   kFloat        real                        -
//   kString       text (UTF-8)                -
//   kTuple,kList  -                           the items
//   kDict         -                           key, value, key, value, ... (insertion order)
//   kOrderedDict  -                           as kDict (built through collections.OrderedDict)
//   kGlobal       text = module, name         -
//   kObject       via_newobj, has_state       callable, args (a kTuple), [state]: an instance
//                                             that unpickling would build as callable(*args)
//                                             (or cls.__new__(cls, *args)) then BUILD(state)
//   kUnsupported  text = what it was and where -: anything else (tensors, sets, big ints,
//                                             bytes, objects fed by SETITEMS/APPENDS, ...)
//
// Capturing never fails on content: what cannot be represented becomes kUnsupported, and only a
// writer that has to emit it refuses it (with the recorded description).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "pickle/value.hpp"

namespace z2f::checkpoint {

struct PickledNode {
    enum class Kind : std::uint8_t {
        kNone,
        kBool,
        kInt,
        kFloat,
        kString,
        kTuple,
        kList,
        kDict,
        kOrderedDict,
        kGlobal,
        kObject,
        kUnsupported,
    };
    static constexpr Kind kLastKind = Kind::kUnsupported;

    Kind kind = Kind::kNone;
    std::int64_t integer = 0;
    double real = 0.0;
    std::string text;
    std::string name;
    std::vector<std::uint32_t> children;
    bool via_newobj = false;
    bool has_state = false;

    friend bool operator==(const PickledNode&, const PickledNode&) = default;
};

struct PickledGraph {
    std::vector<PickledNode> nodes;

    const PickledNode& at(std::uint32_t index) const;
    friend bool operator==(const PickledGraph&, const PickledGraph&) = default;
};

// Copies values of one parsed pickle into a graph. Objects reached twice (the same pickle
// object) become one node; `path` names the value in kUnsupported descriptions, `file` the
// source in the error raised past kMaxNodes.
class PickledGraphBuilder {
  public:
    PickledGraphBuilder(PickledGraph& graph, std::string file)
        : graph_(graph), file_(std::move(file)) {}

    std::uint32_t capture(const pickle::Value& value, const std::string& path);

    // A fresh node (not tied to any pickle object), for values the writer adds itself.
    std::uint32_t add(PickledNode node);

    // Bounds the graph: a hostile param_groups list cannot make every rank hold millions of
    // nodes. Real optimizer states need a few dozen.
    static constexpr std::size_t kMaxNodes = std::size_t{1} << 20;

  private:
    std::uint32_t unsupported(std::string what, const std::string& path);

    PickledGraph& graph_;
    std::string file_;
    // Pickle object -> node; kInProgress while its children are captured (a cycle).
    std::unordered_map<const pickle::Object*, std::uint32_t> seen_;
};

}  // namespace z2f::checkpoint
