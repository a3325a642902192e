// libFuzzer target: the strict safetensors header reader (src/output/safetensors_reader.hpp),
// which zero2fp32-inspect uses on output files and the tests use to read our outputs back.
//
// The input is a whole file: 8-byte length, JSON header, data. On success the harness checks
// what the reader promises: the tensors tile the data buffer exactly in ascending offsets, each
// one's byte size matches its dtype and shape, and the file ends where the last tensor does.
#include <cstdint>

#include "common/checked_math.hpp"
#include "fuzz_support.hpp"
#include "output/safetensors_reader.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace z2f;
    constexpr std::string_view kTarget = "safetensors_header";
    std::span<const std::byte> input = fuzz::as_bytes(data, size);
    fuzz::run_guarded(kTarget, [&] {
        std::uint64_t length = output::safetensors_header_length(
            input.first(std::min<std::size_t>(size, 8)), size, "fuzz");
        fuzz::expect(length <= size - 8, kTarget,
                     "header length accepted past the end of the file");
        output::SafetensorsHeader header = output::parse_safetensors_header(
            input.first(static_cast<std::size_t>(8 + length)), size, "fuzz");
        fuzz::expect(header.data_offset == 8 + header.header_length, kTarget,
                     "data offset is not 8 + N");
        std::uint64_t cursor = 0;
        for (const output::SafetensorsTensorInfo& tensor : header.tensors) {
            fuzz::expect(tensor.begin == cursor && tensor.end >= tensor.begin, kTarget,
                         "accepted tensors do not tile the data buffer");
            auto numel = checked_numel(tensor.shape);
            fuzz::expect(numel.has_value() && checked_mul(*numel, dtype_size(tensor.dtype)) ==
                                                  tensor.end - tensor.begin,
                         kTarget, "accepted a tensor whose size does not match dtype x shape");
            cursor = tensor.end;
        }
        fuzz::expect(header.data_offset + cursor == size, kTarget,
                     "accepted a file that does not end with its data");
    });
    return 0;
}
