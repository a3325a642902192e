// libFuzzer target: the non-executing pickle machine (src/pickle/machine.hpp) and the value-tree
// printer (src/pickle/printer.hpp).
//
// The input is the bytes of a pickle (a data.pkl). On success the harness checks the machine's
// promise that memory is linear in the input: the value tree reachable from the root may not
// hold more than a constant number of bytes per input byte. Then it prints the tree to a null
// stream, with tensor summaries, as zero2fp32-inspect does.
#include <cstdint>
#include <limits>
#include <string>

#include "fuzz_support.hpp"
#include "pickle/machine.hpp"
#include "pickle/printer.hpp"

namespace z2f::fuzz {
namespace {

constexpr std::string_view kTarget = "pickle";

// Bytes of payload an honest pickle can make per input byte: a list filled by 1-byte DUPs holds
// 16 bytes (one Value) per input byte, and the copies some calls make (set(list), torch.Size,
// ...) are bounded by the machine to about two elements per input byte. Tensors are left out:
// each _rebuild_tensor call may reuse a memoised argument tuple and thus build up to 64
// dimensions of shape and stride for 5 input bytes, a constant factor the machine bounds by
// its dimension limit.
constexpr std::uint64_t kPayloadPerInputByte = 64;
constexpr std::uint64_t kPayloadSlack = std::uint64_t{128} << 10;

std::uint64_t payload_bytes(const pickle::Object& object) {
    using pickle::ObjectType;
    constexpr std::uint64_t kValue = sizeof(pickle::Value);
    switch (object.type) {
        case ObjectType::kStr:
            return static_cast<const pickle::Str&>(object).text.size();
        case ObjectType::kBytes:
            return static_cast<const pickle::Bytes&>(object).data.size();
        case ObjectType::kBigInt: {
            const auto& big = static_cast<const pickle::BigInt&>(object);
            return big.le_bytes.size() + big.decimal.size();
        }
        case ObjectType::kTuple:
        case ObjectType::kList:
        case ObjectType::kSet:
            return kValue * static_cast<const pickle::Sequence&>(object).items.size();
        case ObjectType::kDict:
            return 2 * kValue * static_cast<const pickle::Dict&>(object).items.size();
        case ObjectType::kGlobal: {
            const auto& global = static_cast<const pickle::Global&>(object);
            return global.module.size() + global.name.size();
        }
        case ObjectType::kInstance: {
            const auto& instance = static_cast<const pickle::Instance&>(object);
            return kValue * (instance.list_items.size() + 2 * instance.dict_items.size());
        }
        case ObjectType::kStorage: {
            const auto& storage = static_cast<const pickle::Storage&>(object);
            return storage.key.size() + storage.location.size();
        }
        case ObjectType::kTensor:
            return 0;  // see kPayloadPerInputByte
    }
    return 0;
}

void check_document(const pickle::Document& document, std::size_t input_size) {
    const std::uint64_t budget = kPayloadPerInputByte * input_size + kPayloadSlack;
    expect(document.object_count() <= input_size, kTarget,
           "more objects than input bytes: every object must come from an opcode");
    std::uint64_t payload = 0;
    for_each_object(document.root(), [&](const pickle::Object& object) {
        payload += payload_bytes(object);
        if (object.type == pickle::ObjectType::kTensor) {
            const auto& tensor = static_cast<const pickle::Tensor&>(object);
            expect(tensor.storage != nullptr, kTarget, "a tensor without a storage");
            expect(tensor.shape.size() == tensor.stride.size(), kTarget,
                   "a tensor whose shape and stride differ in rank");
            pickle::tensor_summary(tensor);
        }
        pickle::describe_type(pickle::Value::object(const_cast<pickle::Object*>(&object)));
    });
    if (payload > budget) {
        finding(kTarget, "value tree holds " + std::to_string(payload) + " bytes of payload for " +
                             std::to_string(input_size) +
                             " input bytes: memory is not linear in the input");
    }

    pickle::PrintOptions options;
    // Any depth, as zero2fp32-inspect --depth allows; lines far below the tool's default:
    // truncation is exercised all the same, and each input stays cheap.
    options.max_depth = std::numeric_limits<std::uint32_t>::max();
    options.max_lines = 5000;
    options.describe_tensor = [](const pickle::Tensor& tensor) { return tensor.storage->key; };
    pickle::print_value(null_stream(), document.root(), options);
}

}  // namespace
}  // namespace z2f::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace z2f;
    fuzz::run_guarded(fuzz::kTarget, [&] {
        pickle::Document document = pickle::parse_pickle(fuzz::as_bytes(data, size), "fuzz.pkl");
        fuzz::check_document(document, size);
    });
    return 0;
}
