// The index file of a sharded output (model.safetensors.index.json, pytorch_model.bin.index.json),
// byte for byte as DeepSpeed's zero_to_fp32.py and transformers write it:
//
//     json.dumps({"metadata": {...}, "weight_map": {...}}, indent=2, sort_keys=True) + "\n"
//
// which gives, for example (keys sorted at every level, two-space indent, ": " after keys,
// "," at line ends, no trailing spaces, a final newline):
//
//     {
//       "metadata": {
//         "total_size": 14560
//       },
//       "weight_map": {
//         "fc1.bias": "model-00001-of-00002.safetensors",
//         "fc2.weight": "model-00002-of-00002.safetensors"
//       }
//     }
//
// - metadata: "total_size" (an integer: bytes of unique storages) and optional extra entries
//   whose values are strings (the safetensors index parser types every other metadata value as
//   a string), sorted together with "total_size";
// - an empty object is written `{}` (Python's encoder does the same under indent);
// - strings escaped as json.dumps(ensure_ascii=True) does (see json_escape.hpp); keys sorted by
//   code point, which equals the UTF-8 byte order used here.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>

namespace z2f::output {

using StringPairView = std::pair<std::string_view, std::string_view>;

// weight_map: tensor name -> file name, in any order. Duplicate tensor names, and an extra
// metadata key "total_size" or a duplicate extra key, are internal errors (a Python dict cannot
// hold them); names that are not UTF-8 are input errors.
std::string index_json(std::uint64_t total_size, std::span<const StringPairView> extra_metadata,
                       std::span<const StringPairView> weight_map);

}  // namespace z2f::output
