// libFuzzer target: the reader of torch's legacy non-zip format
// (src/container/legacy_archive.hpp), and TorchFile's tensor location on top of it.
//
// The input is a whole file, opened as production code opens it (a path, a real descriptor).
// What the reader promises on success, checked here: the object pickle lies inside the file;
// storages follow one another in file order, each with its eight-byte count in front, without
// gaps, up to the end of the file; find() returns each of them by key; and every tensor
// TorchFile locates lies inside the bytes of its own storage.
#include <algorithm>
#include <cstdint>
#include <string>

#include "container/legacy_archive.hpp"
#include "container/torch_file.hpp"
#include "fuzz_support.hpp"
#include "io/posix_file.hpp"

namespace z2f::fuzz {
namespace {

constexpr std::string_view kTarget = "legacy_archive";
// The production limit is 1 GiB; inputs here are far smaller anyway.
constexpr std::uint64_t kMaxPickle = std::uint64_t{1} << 20;

void check_archive(const container::LegacyArchive& archive, std::uint64_t size) {
    expect(archive.file_size() == size, kTarget, "file_size() differs from the input size");
    expect(
        archive.pickle_offset() <= size && archive.pickle_size() <= size - archive.pickle_offset(),
        kTarget, "the object pickle lies outside the file");
    std::uint64_t next =
        archive.storages().empty() ? size : archive.storages().front().count_offset;
    for (const container::LegacyStorage& storage : archive.storages()) {
        expect(storage.count_offset == next, kTarget,
               "a storage does not start where the one before it ends");
        expect(storage.data_offset == storage.count_offset + 8, kTarget,
               "a storage's bytes do not follow its count");
        expect(storage.data_offset <= size && storage.size <= size - storage.data_offset, kTarget,
               "a storage extends past the end of the file");
        expect(archive.find(storage.key) == &storage, kTarget,
               "find() does not return the storage of that key");
        next = storage.data_offset + storage.size;
    }
    expect(next == size, kTarget, "the storages do not end at the end of the file");
}

void locate_every_tensor(const container::TorchFile& file) {
    for_each_object(file.root(), [&](const pickle::Object& object) {
        if (object.type != pickle::ObjectType::kTensor)
            return;
        const auto& tensor = static_cast<const pickle::Tensor&>(object);
        run_guarded(kTarget, [&] {
            container::TensorBytes bytes = file.locate(tensor, "tensor");
            const container::LegacyStorage* storage = file.legacy()->find(tensor.storage->key);
            expect(storage != nullptr, kTarget,
                   "locate() succeeded on a storage the file does not hold");
            expect(bytes.offset >= storage->data_offset && bytes.length <= storage->size &&
                       bytes.offset - storage->data_offset <= storage->size - bytes.length,
                   kTarget, "locate() returned bytes outside the tensor's storage");
        });
    });
}

}  // namespace
}  // namespace z2f::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace z2f;
    std::span<const std::byte> input = fuzz::as_bytes(data, size);
    const std::string& path = fuzz::scratch_file(0).write(input);
    fuzz::run_guarded(fuzz::kTarget, [&] {
        io::File file = io::File::open_read(path);
        pickle::Document document;
        container::LegacyArchive archive =
            container::LegacyArchive::open(file, document, fuzz::kMaxPickle);
        fuzz::check_archive(archive, size);
    });
    // The same bytes through TorchFile, which sends only files that start like the legacy
    // format to that reader.
    fuzz::run_guarded(fuzz::kTarget, [&] {
        container::TorchFile file = container::TorchFile::open(path);
        if (file.legacy() != nullptr)
            fuzz::locate_every_tensor(file);
    });
    return 0;
}
