// libFuzzer target: the torch zip reader (src/container/zip_reader.hpp).
//
// The input is a whole file. The harness opens it as production code does (a path, a real
// descriptor), then asks for every record's data offset and contents, checking what the reader
// promises on success: names are unique and findable, a record's data lies inside the file, and
// read_record returns exactly the declared size.
#include <algorithm>
#include <cstdint>
#include <string>

#include "container/zip_reader.hpp"
#include "fuzz_support.hpp"
#include "io/posix_file.hpp"

namespace z2f::fuzz {
namespace {

constexpr std::string_view kTarget = "zip_reader";
// Records larger than this are not read back (the fuzzer's inputs are far smaller anyway);
// the size refusal itself is part of what is exercised.
constexpr std::uint64_t kMaxRecordRead = std::uint64_t{1} << 20;

void check_archive(const io::File& file, const container::TorchArchive& archive,
                   std::uint64_t size) {
    expect(archive.file_size() == size, kTarget, "file_size() differs from the input size");
    expect(!archive.prefix().empty(), kTarget, "an opened archive has an empty prefix");
    expect(!archive.records().empty(), kTarget, "an opened archive has no records");
    for (const container::ZipRecord& record : archive.records()) {
        expect(!record.name.empty(), kTarget, "a record has an empty name");
        expect(archive.find(record.name) == &record, kTarget,
               "find() does not return the record of that name (duplicate names?)");
        expect(record.local_header_offset < size, kTarget, "a local header lies past the file");
        run_guarded(kTarget, [&] {
            std::uint64_t offset = archive.data_offset(file, record);
            expect(offset <= size && record.size <= size - offset, kTarget,
                   "data_offset() accepted a record that extends past the end of the file");
        });
        run_guarded(kTarget, [&] {
            std::vector<std::byte> bytes = archive.read_record(file, record, kMaxRecordRead);
            expect(bytes.size() == record.size, kTarget,
                   "read_record() returned a different number of bytes than the record size");
        });
    }
    run_guarded(kTarget, [&] { archive.require("data.pkl"); });
}

}  // namespace
}  // namespace z2f::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace z2f;
    std::span<const std::byte> input = fuzz::as_bytes(data, size);
    // The sniffer sees the first bytes only, as in TorchArchive::open.
    container::sniff_torch_file(input.first(std::min<std::size_t>(input.size(), 512)));

    const std::string& path = fuzz::scratch_file(0).write(input);
    fuzz::run_guarded(fuzz::kTarget, [&] {
        io::File file = io::File::open_read(path);
        container::TorchArchive archive = container::TorchArchive::open(file);
        fuzz::check_archive(file, archive, size);
    });
    return 0;
}
