// torch's legacy (non-zip) format: the real files of a DeepSpeed run saved with
// "checkpoint_serialization": false, and hand-built ones for every rule of
// src/container/legacy_archive.hpp, malformed ones included.
#include "container/legacy_archive.hpp"

#include <gtest/gtest.h>

#include "common/errors.hpp"
#include "container/torch_file.hpp"
#include "pickle/machine.hpp"
#include "support/legacy_builder.hpp"
#include "support/test_files.hpp"

namespace z2f {
namespace {

using pickle::PickleValue;
using testing::LegacyFileParts;
using testing::LegacyStorageBytes;

const std::string kNoser = "../deepspeed-newest/noser_z2_ws2_fp32/global_step2/";

std::vector<std::byte> floats(std::initializer_list<float> values) {
    std::vector<std::byte> out(values.size() * 4);
    std::size_t i = 0;
    for (float value : values) {
        std::memcpy(&out[i], &value, 4);
        i += 4;
    }
    return out;
}

// {'w': tensor (2, 3) at offset 1 of a 7-element float storage 'a', 'b': bf16 (2,) of 'b'}.
LegacyFileParts two_storages() {
    PickleValue object =
        PickleValue::dict({{"w", testing::legacy_tensor(DType::kF32, "a", 7, 1, {2, 3})},
                           {"b", testing::legacy_tensor(DType::kBF16, "b", 2, 0, {2})}});
    std::vector<std::byte> bf16(4, std::byte{0x3f});
    return testing::legacy_parts(object, {{"a", DType::kF32, floats({0, 1, 2, 3, 4, 5, 6}), {}},
                                          {"b", DType::kBF16, bf16, {}}});
}

std::string write(const testing::TempDir& dir, const std::vector<std::byte>& bytes) {
    const std::string path = dir.file("legacy.pt");
    testing::write_file_bytes(path, bytes);
    return path;
}

// The error TorchFile::open gives for `bytes`, or "" when it opens.
std::string open_error(const std::vector<std::byte>& bytes, ErrorKind* kind = nullptr) {
    testing::TempDir dir;
    try {
        container::TorchFile::open(write(dir, bytes));
    } catch (const Error& error) {
        if (kind != nullptr)
            *kind = error.kind();
        return error.what();
    }
    return "";
}

const pickle::Tensor& tensor_at(const container::TorchFile& file, const std::string& key) {
    const pickle::Value* value = file.root().get<pickle::Dict>()->find(key);
    return *value->get<pickle::Tensor>();
}

TEST(LegacyArchive, RealDeepSpeedFilesOpenWithEveryStorageInPlace) {
    // The storage keys, counts and offsets torch wrote into rank 0's optimizer file (found by
    // walking the file with Python's pickle module, which the reader does not share).
    container::TorchFile optim = container::TorchFile::open(
        testing::fixture_path(kNoser + "zero_pp_rank_0_mp_rank_00_optim_states.pt"));
    ASSERT_NE(optim.legacy(), nullptr);
    EXPECT_EQ(optim.zip(), nullptr);
    const std::vector<container::LegacyStorage>& storages = optim.legacy()->storages();
    ASSERT_EQ(storages.size(), 4u);
    EXPECT_EQ(storages[0].key, "500588176");
    EXPECT_EQ(storages[0].count_offset, 1850u);
    EXPECT_EQ(storages[0].size, 1820u * 4);
    EXPECT_EQ(storages[1].count_offset, 9138u);
    EXPECT_EQ(storages[2].count_offset, 16426u);
    EXPECT_EQ(storages[2].size, 4u);
    EXPECT_EQ(storages[3].data_offset, 16446u);
    EXPECT_EQ(storages[3].data_offset + storages[3].size, optim.file_size());
    EXPECT_EQ(optim.legacy()->pickle_offset(), 137u);
    EXPECT_EQ(optim.pickle_size(), 1778u - 137u);

    container::TorchFile model =
        container::TorchFile::open(testing::fixture_path(kNoser + "mp_rank_00_model_states.pt"));
    ASSERT_NE(model.legacy(), nullptr);
    ASSERT_EQ(model.legacy()->storages().size(), 1u);
    EXPECT_EQ(model.legacy()->storages()[0].data_offset, 2075u);
    // module['fc1.weight'] is a view at element 2 of its group's flat fp32 buffer.
    const pickle::Value* module = model.root().get<pickle::Dict>()->find("module");
    ASSERT_NE(module, nullptr);
    const auto* weight = module->get<pickle::Dict>()->find("fc1.weight");
    ASSERT_NE(weight, nullptr);
    container::TensorBytes bytes = model.locate(*weight->get<pickle::Tensor>(), "fc1.weight");
    EXPECT_EQ(bytes.offset, 2075u + 2 * 4);
    EXPECT_EQ(bytes.length, 53u * 37 * 4);
    EXPECT_EQ(bytes.record, "storage 509445392");
}

TEST(LegacyArchive, HandBuiltFileLocatesViewsAndHasNoCrc) {
    testing::TempDir dir;
    const std::vector<std::byte> bytes = testing::build_legacy_file(two_storages());
    container::TorchFile file = container::TorchFile::open(write(dir, bytes));
    ASSERT_NE(file.legacy(), nullptr);
    const auto& storages = file.legacy()->storages();
    ASSERT_EQ(storages.size(), 2u);
    EXPECT_EQ(storages[1].data_offset + 4, bytes.size());

    container::TensorBytes w = file.locate(tensor_at(file, "w"), "w");
    EXPECT_EQ(w.offset, storages[0].data_offset + 4);
    EXPECT_EQ(w.length, 24u);
    EXPECT_EQ(w.shape, (std::vector<std::uint64_t>{2, 3}));
    EXPECT_EQ(bytes[w.offset], floats({1})[0]);
    container::TensorBytes b = file.locate(tensor_at(file, "b"), "b");
    EXPECT_EQ(b.dtype, DType::kBF16);
    EXPECT_EQ(b.offset, storages[1].data_offset);

    std::vector<InputRecord> records = file.located_records(7);
    ASSERT_EQ(records.size(), 2u);
    for (const InputRecord& record : records) {
        EXPECT_EQ(record.file, 7u);
        EXPECT_EQ(record.crc32, 0u);
        EXPECT_TRUE(record.format_has_no_crc);
    }
    EXPECT_EQ(records[0].name, "storage a");
    EXPECT_EQ(records[0].offset, storages[0].data_offset);
    EXPECT_EQ(records[0].length, 28u);
}

TEST(LegacyArchive, PicklesLongerThanTheFirstWindowAndOtherProtocols) {
    // An object pickle of ~200 KB: the reader grows its window until the pickle ends.
    PickleValue::Items items;
    for (int i = 0; i < 4000; ++i)
        items.emplace_back("entry_" + std::to_string(i) + std::string(40, 'x'), i);
    items.emplace_back("t", testing::legacy_tensor(DType::kF32, "k", 2, 0, {2}));
    LegacyFileParts parts =
        testing::legacy_parts(PickleValue::dict(items), {{"k", DType::kF32, floats({1, 2}), {}}});
    testing::TempDir dir;
    const std::vector<std::byte> big = testing::build_legacy_file(parts);
    ASSERT_GT(big.size(), 200'000u);
    container::TorchFile file = container::TorchFile::open(write(dir, big));
    EXPECT_EQ(file.locate(tensor_at(file, "t"), "t").offset + 8, big.size());

    // The same magic number pickled at protocol 4 (FRAME, then LONG1): torch.save given
    // pickle_protocol=4 starts this way.
    parts = two_storages();
    parts.magic = {std::byte{0x80}, std::byte{0x04}, std::byte{0x95}};
    for (int i = 0; i < 8; ++i)
        parts.magic.push_back(std::byte{static_cast<unsigned char>(i == 0 ? 13 : 0)});
    std::vector<std::byte> long1 = testing::legacy_magic_pickle();
    parts.magic.insert(parts.magic.end(), long1.begin() + 2, long1.end());
    EXPECT_EQ(open_error(testing::build_legacy_file(parts)), "");
}

TEST(LegacyArchive, MalformedHeadersAreRefusedNamingTheFormat) {
    LegacyFileParts parts = two_storages();
    parts.magic = pickle::dump(PickleValue(12345));
    parts.magic[1] = std::byte{3};  // PROTO 3: still sniffed as the legacy format
    std::string message = open_error(testing::build_legacy_file(parts));
    EXPECT_NE(message.find("legacy (non-zip)"), std::string::npos) << message;
    EXPECT_NE(message.find("expected the magic number"), std::string::npos) << message;

    parts = two_storages();
    parts.version = pickle::dump(PickleValue(1000));
    message = open_error(testing::build_legacy_file(parts));
    EXPECT_NE(message.find("protocol version is 1000, expected 1001"), std::string::npos)
        << message;

    parts = two_storages();
    parts.sys_info = testing::legacy_sys_info_pickle(false);
    ErrorKind kind = ErrorKind::kInternal;
    message = open_error(testing::build_legacy_file(parts), &kind);
    EXPECT_EQ(kind, ErrorKind::kUnsupported);
    EXPECT_NE(message.find("big-endian"), std::string::npos) << message;

    parts = two_storages();
    parts.sys_info = pickle::dump(PickleValue::list({1, 2}));
    message = open_error(testing::build_legacy_file(parts));
    EXPECT_NE(message.find("expected the sys_info dict"), std::string::npos) << message;

    // A file cut inside the object pickle.
    std::vector<std::byte> whole = testing::build_legacy_file(two_storages());
    std::vector<std::byte> cut(whole.begin(), whole.begin() + 150);
    message = open_error(cut);
    EXPECT_NE(message.find("the file ends inside saved object"), std::string::npos) << message;
    // Not a pickle at all after the magic number: the machine names the byte and opcode.
    cut.assign(whole.begin(), whole.begin() + 15);
    cut.resize(64, std::byte{0});
    message = open_error(cut);
    EXPECT_NE(message.find("protocol version (a pickle at byte 15)"), std::string::npos) << message;
}

TEST(LegacyArchive, StorageKeysAndCountsAreChecked) {
    LegacyFileParts parts = two_storages();
    parts.keys = PickleValue::dict({});
    std::string message = open_error(testing::build_legacy_file(parts));
    EXPECT_NE(message.find("expected the list of storage keys"), std::string::npos) << message;

    parts = two_storages();
    parts.keys = PickleValue::list({"a", 5});
    message = open_error(testing::build_legacy_file(parts));
    EXPECT_NE(message.find("storage key 1 is int, expected a str"), std::string::npos) << message;

    parts = two_storages();
    parts.storages[1].key = "zz";
    message = open_error(testing::build_legacy_file(parts));
    EXPECT_NE(message.find("storage 'zz' is listed among the storage keys but the saved object "
                           "names no such storage"),
              std::string::npos)
        << message;

    parts = two_storages();
    parts.storages[1] = parts.storages[0];
    message = open_error(testing::build_legacy_file(parts));
    EXPECT_NE(message.find("storage 'a' is listed twice"), std::string::npos) << message;

    parts = two_storages();
    parts.storages.pop_back();
    message = open_error(testing::build_legacy_file(parts));
    EXPECT_NE(message.find("storage 'b' is named by the saved object but not listed"),
              std::string::npos)
        << message;

    parts = two_storages();
    parts.storages[0].count = 8;
    message = open_error(testing::build_legacy_file(parts));
    EXPECT_NE(message.find("counts 8 elements, but its persistent id declares 7"),
              std::string::npos)
        << message;

    parts = two_storages();
    parts.storages[1].count = -1;
    message = open_error(testing::build_legacy_file(parts));
    EXPECT_NE(message.find("counts -1 elements"), std::string::npos) << message;

    // The last storage's bytes cut short, and bytes after the last storage.
    std::vector<std::byte> whole = testing::build_legacy_file(two_storages());
    whole.pop_back();
    message = open_error(whole);
    EXPECT_NE(message.find("runs past the end of the"), std::string::npos) << message;
    whole = testing::build_legacy_file(two_storages());
    whole.resize(whole.size() - 8);
    message = open_error(whole);
    EXPECT_NE(message.find("before the count of storage 'b'"), std::string::npos) << message;
    parts = two_storages();
    parts.trailer = {std::byte{1}, std::byte{2}, std::byte{3}};
    message = open_error(testing::build_legacy_file(parts));
    EXPECT_NE(message.find("3 bytes follow the last storage"), std::string::npos) << message;
}

TEST(LegacyArchive, StorageViewsAndBadTensorsAreRefused) {
    // torch < 1.0 wrote a view of a root storage into the sixth element.
    LegacyFileParts parts = two_storages();
    parts.object =
        PickleValue::dict({{"s", PickleValue::persistent_id(PickleValue::tuple(
                                     {"storage", PickleValue::global("torch", "FloatStorage"), "a",
                                      "cpu", 7, PickleValue::tuple({"a", 0, 7})}))}});
    parts.storages.pop_back();
    std::string message = open_error(testing::build_legacy_file(parts));
    EXPECT_NE(message.find("view metadata"), std::string::npos) << message;

    // A tensor view past the end of its storage is refused when located.
    parts = two_storages();
    parts.object = PickleValue::dict({{"w", testing::legacy_tensor(DType::kF32, "a", 7, 2, {2, 3})},
                                      {"b", testing::legacy_tensor(DType::kBF16, "b", 2, 0, {2})}});
    testing::TempDir dir;
    container::TorchFile file =
        container::TorchFile::open(write(dir, testing::build_legacy_file(parts)));
    try {
        file.locate(tensor_at(file, "w"), "w");
        ADD_FAILURE() << "a view past its storage located";
    } catch (const Error& error) {
        EXPECT_NE(
            std::string(error.what()).find("runs past its 28-byte storage record 'storage a'"),
            std::string::npos)
            << error.what();
    }
}

TEST(LegacyArchive, PickleLimitIsEnforced) {
    testing::TempDir dir;
    io::File file = io::File::open_read(write(dir, testing::build_legacy_file(two_storages())));
    pickle::Document document;
    try {
        container::LegacyArchive::open(file, document, 20);
        ADD_FAILURE() << "a pickle over the limit was read";
    } catch (const Error& error) {
        EXPECT_NE(std::string(error.what()).find("runs past 20 bytes, the limit for a pickle"),
                  std::string::npos)
            << error.what();
    }
    EXPECT_NO_THROW(container::LegacyArchive::open(file, document, 1 << 20));
    EXPECT_NE(document.root().get<pickle::Dict>(), nullptr);
}

}  // namespace
}  // namespace z2f
