// libFuzzer target: the wire codec (src/common/wire_codec.hpp) and every payload decoded with it
// between ranks: the file list, per-file metadata (one codec for every layout; selectors 1 and 2
// both take it, 2 being the grid inputs' own before there was one), the
// file grid, phase outcomes, discovery's routed payload (checkpoint/routing.hpp).
//
// The first input byte chooses the payload, the rest is decoded. Payloads only ever come from
// another rank of the same run, so their contract differs from the file readers': a malformed
// payload must end in a z2f::Error of kind kInternal (never a crash, an out-of-bounds read or an
// allocation the bytes cannot back). A payload that decodes must encode back to the same bytes
// (the encoding is canonical: booleans are 0/1, enumerators in range, no trailing bytes).
#include <cstdint>

#include "checkpoint/meta_codec.hpp"
#include "checkpoint/routing.hpp"
#include "fuzz_support.hpp"
#include "mpi/agreement.hpp"

namespace {

constexpr std::string_view kTarget = "wire_codec";

template <typename Decode>
void decode_guarded(Decode&& decode) {
    try {
        decode();
    } catch (const z2f::Error& error) {
        if (error.kind() != z2f::ErrorKind::kInternal)
            z2f::fuzz::finding(
                kTarget, std::string("a payload failed with a user-facing error: ") + error.what());
    }
}

std::vector<std::byte> copy_of(std::span<const std::byte> bytes) {
    return {bytes.begin(), bytes.end()};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace z2f;
    if (size == 0)
        return 0;
    std::span<const std::byte> payload = fuzz::as_bytes(data + 1, size - 1);
    switch (data[0] % 6) {
        case 0:
            decode_guarded([&] {
                checkpoint::CheckpointFiles files = checkpoint::decode_files(payload);
                fuzz::expect(checkpoint::encode_files(files) == copy_of(payload), kTarget,
                             "file list does not encode back to its bytes");
            });
            break;
        case 1:
        case 2:  // the selector of grid inputs before the two codecs became one
            decode_guarded([&] {
                WireReader in(payload, "file metadata");
                WireWriter out;
                while (!in.at_end())
                    checkpoint::encode_file_meta(checkpoint::decode_file_meta(in), out);
                fuzz::expect(out.bytes() == copy_of(payload), kTarget,
                             "file metadata does not encode back to its bytes");
            });
            break;
        case 3:
            decode_guarded([&] {
                checkpoint::FileGrid grid = checkpoint::decode_file_grid(payload);
                fuzz::expect(checkpoint::encode_file_grid(grid) == copy_of(payload), kTarget,
                             "file grid does not encode back to its bytes");
            });
            break;
        case 4:
            decode_guarded([&] {
                mpi::Outcome outcome = mpi::decode_outcome(payload);
                fuzz::expect(mpi::encode_outcome(outcome) == copy_of(payload), kTarget,
                             "outcome does not encode back to its bytes");
            });
            break;
        default:
            decode_guarded([&] {
                checkpoint::DiscoveredCheckpoint found = checkpoint::decode_discovered(payload);
                fuzz::expect(checkpoint::encode_discovered(found) == copy_of(payload), kTarget,
                             "discovered checkpoint does not encode back to its bytes");
            });
            break;
    }
    return 0;
}
