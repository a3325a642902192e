#include "container/zip_reader.hpp"

#include <gtest/gtest.h>

#include "common/errors.hpp"
#include "support/test_files.hpp"
#include "support/zip_builder.hpp"

namespace z2f {
namespace {

using testing::build_zip;
using testing::bytes_of;
using testing::TempDir;
using testing::ZipBuilderEntry;
using testing::ZipBuilderOptions;

std::vector<ZipBuilderEntry> sample_entries(const std::string& prefix = "archive") {
    return {
        {prefix + "/data.pkl", bytes_of("\x80\x02K\x07."), 0, {}, 0, true},
        {prefix + "/byteorder", bytes_of("little"), 0, {}, 0, true},
        {prefix + "/data/0", bytes_of(std::string(40, 'x')), 0, {}, 0, true},
        {prefix + "/version", bytes_of("3\n"), 0, {}, 0, true},
    };
}

struct Opened {
    io::File file;
    container::TorchArchive archive;
};

Opened open_bytes(const TempDir& dir, const std::vector<std::byte>& bytes,
                  const std::string& name = "a.pt") {
    testing::write_file_bytes(dir.file(name), bytes);
    io::File file = io::File::open_read(dir.file(name));
    container::TorchArchive archive = container::TorchArchive::open(file);
    return {std::move(file), std::move(archive)};
}

std::string open_error(const TempDir& dir, const std::vector<std::byte>& bytes) {
    try {
        open_bytes(dir, bytes);
    } catch (const Error& error) {
        return error.what();
    }
    return "";
}

TEST(ZipReader, ReadsEveryBundledTorchFile) {
    auto files = testing::find_files(testing::fixture_root(), ".pt");
    auto bins = testing::find_files(testing::fixture_root(), ".bin");
    files.insert(files.end(), bins.begin(), bins.end());
    ASSERT_GT(files.size(), 50u);
    for (const auto& path : files) {
        SCOPED_TRACE(path);
        io::File file = io::File::open_read(path);
        container::TorchArchive archive = container::TorchArchive::open(file);
        EXPECT_FALSE(archive.prefix().empty());
        const container::ZipRecord& pickle = archive.require("data.pkl");
        EXPECT_GT(pickle.size, 0u);
        for (const container::ZipRecord& record : archive.records()) {
            // torch pads every record's data to a 64-byte file offset.
            EXPECT_EQ(archive.data_offset(file, record) % 64, 0u) << record.name;
        }
    }
}

TEST(ZipReader, PrefixIsTheFileStemForTorchSave) {
    io::File file = io::File::open_read(
        testing::fixture_path("z2_ws2_fp32/global_step2/mp_rank_00_model_states.pt"));
    container::TorchArchive archive = container::TorchArchive::open(file);
    EXPECT_EQ(archive.prefix(), "mp_rank_00_model_states");
    EXPECT_NE(archive.find("version"), nullptr);
    EXPECT_EQ(archive.find("nonexistent"), nullptr);
}

TEST(ZipReader, Torch2RecordsAreIgnoredAndSizesComeFromTheDirectory) {
    io::File file = io::File::open_read(testing::fixture_path(
        "z3_ws2_fp32_torch2/global_step2/zero_pp_rank_0_mp_rank_00_optim_states.pt"));
    container::TorchArchive archive = container::TorchArchive::open(file);
    EXPECT_NE(archive.find(".format_version"), nullptr);
    EXPECT_NE(archive.find(".storage_alignment"), nullptr);
    EXPECT_NE(archive.find(".data/serialization_id"), nullptr);
    const container::ZipRecord& storage = archive.require("data/3");
    EXPECT_EQ(storage.size, 7296u);
    EXPECT_EQ(storage.flags, 0x0808);
}

TEST(ZipReader, PlainArchiveWithoutZip64) {
    TempDir dir;
    ZipBuilderOptions options;
    options.zip64_end = false;
    options.data_descriptors = false;
    auto opened = open_bytes(dir, build_zip(sample_entries(), options));
    EXPECT_EQ(opened.archive.prefix(), "archive");
    EXPECT_EQ(opened.archive.records().size(), 4u);
    EXPECT_EQ(opened.archive.require("data/0").size, 40u);
}

TEST(ZipReader, Zip64ExtraFieldsReplaceSaturatedValues) {
    TempDir dir;
    ZipBuilderOptions options;
    options.zip64_extra_fields = true;
    auto opened = open_bytes(dir, build_zip(sample_entries(), options));
    const container::ZipRecord& record = opened.archive.require("data/0");
    EXPECT_EQ(record.size, 40u);
    EXPECT_EQ(record.compressed_size, 40u);
    std::uint64_t offset = opened.archive.data_offset(opened.file, record);
    std::vector<std::byte> data(40);
    opened.file.read_exact(offset, data);
    EXPECT_EQ(data, bytes_of(std::string(40, 'x')));
}

TEST(ZipReader, DataOffsetComesFromTheLocalHeader) {
    TempDir dir;
    auto entries = sample_entries();
    entries[2].align64 = false;
    entries[2].local_extra_padding = 13;  // local extra differs from the central one (empty)
    auto opened = open_bytes(dir, build_zip(entries));
    const container::ZipRecord& record = opened.archive.require("data/0");
    std::uint64_t offset = opened.archive.data_offset(opened.file, record);
    EXPECT_EQ(offset, record.local_header_offset + 30 + std::string("archive/data/0").size() + 13);
    std::vector<std::byte> data(40);
    opened.file.read_exact(offset, data);
    EXPECT_EQ(data, bytes_of(std::string(40, 'x')));
}

TEST(ZipReader, ReadRecordChecksCrc) {
    TempDir dir;
    auto entries = sample_entries();
    auto good = open_bytes(dir, build_zip(entries));
    auto bytes = good.archive.read_record(good.file, good.archive.require("data.pkl"), 1024);
    EXPECT_EQ(bytes, entries[0].data);

    entries[0].crc_override = 0x12345678;
    auto bad = open_bytes(dir, build_zip(entries), "bad.pt");
    try {
        bad.archive.read_record(bad.file, bad.archive.require("data.pkl"), 1024);
        FAIL() << "expected a CRC error";
    } catch (const Error& error) {
        EXPECT_NE(std::string(error.what()).find("CRC-32"), std::string::npos) << error.what();
        EXPECT_NE(std::string(error.what()).find("bad.pt"), std::string::npos) << error.what();
    }
    // A zero CRC means "not recorded" (torch.serialization.set_crc32_options(False)).
    entries[0].crc_override = 0;
    auto unrecorded = open_bytes(dir, build_zip(entries), "nocrc.pt");
    EXPECT_NO_THROW(unrecorded.archive.read_record(unrecorded.file,
                                                   unrecorded.archive.require("data.pkl"), 64));
}

TEST(ZipReader, ReadRecordIsBoundedByTheCallersLimit) {
    TempDir dir;
    auto opened = open_bytes(dir, build_zip(sample_entries()));
    EXPECT_THROW(opened.archive.read_record(opened.file, opened.archive.require("data/0"), 39),
                 Error);
}

TEST(ZipReader, CompressedRecordsAreRefusedWhenRead) {
    TempDir dir;
    auto entries = sample_entries();
    entries[2].method = 8;
    auto opened = open_bytes(dir, build_zip(entries));  // listing the directory is fine
    try {
        opened.archive.data_offset(opened.file, opened.archive.require("data/0"));
        FAIL();
    } catch (const Error& error) {
        EXPECT_EQ(error.kind(), ErrorKind::kUnsupported);
        EXPECT_NE(std::string(error.what()).find("compressed (method 8)"), std::string::npos);
    }
}

TEST(ZipReader, EntriesMustShareOneFolder) {
    TempDir dir;
    auto entries = sample_entries();
    entries[3].name = "other/version";
    EXPECT_NE(
        open_error(dir, build_zip(entries)).find("is not under the archive folder 'archive/'"),
        std::string::npos);
    auto flat = sample_entries();
    flat[0].name = "data.pkl";
    EXPECT_NE(open_error(dir, build_zip(flat)).find("not inside an archive folder"),
              std::string::npos);
}

TEST(ZipReader, DuplicateNamesAreRefused) {
    TempDir dir;
    auto entries = sample_entries();
    entries[3].name = "archive/data/0";
    EXPECT_NE(open_error(dir, build_zip(entries)).find("appears twice"), std::string::npos);
}

TEST(ZipReader, ByteOrder) {
    TempDir dir;
    auto entries = sample_entries();
    entries[1].data = bytes_of("big");
    try {
        open_bytes(dir, build_zip(entries));
        FAIL();
    } catch (const Error& error) {
        EXPECT_EQ(error.kind(), ErrorKind::kUnsupported);
        EXPECT_NE(std::string(error.what()).find("big-endian"), std::string::npos);
    }
    entries[1].data = bytes_of("middle");
    EXPECT_NE(open_error(dir, build_zip(entries)).find("expected 'little' or 'big'"),
              std::string::npos);
    entries.erase(entries.begin() + 1);  // no byteorder record: little-endian
    EXPECT_EQ(open_error(dir, build_zip(entries)), "");
}

TEST(ZipReader, RefusesNonZipFilesClearly) {
    TempDir dir;
    EXPECT_NE(open_error(dir, {}).find("file is empty"), std::string::npos);
    EXPECT_NE(
        open_error(dir, bytes_of("hello world, certainly not a zip")).find("not a torch.save file"),
        std::string::npos);
    auto legacy =
        bytes_of(std::string("\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19.", 15));
    legacy.resize(200, std::byte{0});
    std::string message = open_error(dir, legacy);
    EXPECT_NE(message.find("legacy (non-zip)"), std::string::npos) << message;
    auto preview = bytes_of("PYTORCH1 and more bytes here");
    EXPECT_NE(open_error(dir, preview).find("preview"), std::string::npos);
}

TEST(ZipReader, SniffRecognisesTar) {
    std::vector<std::byte> tar(512, std::byte{0});
    for (std::size_t i = 0; i < 5; ++i)
        tar[257 + i] = static_cast<std::byte>("ustar"[i]);
    EXPECT_EQ(container::sniff_torch_file(tar), container::TorchFileKind::kLegacyTar);
}

TEST(ZipReader, EveryTruncationIsACleanError) {
    TempDir dir;
    auto whole = testing::read_file_bytes(testing::fixture_path(
        "z3_ws2_fp32_torch2/global_step2/zero_pp_rank_0_mp_rank_00_optim_states.pt"));
    for (std::size_t cut = 0; cut<whole.size(); cut += cut> whole.size() - 700 ? 1u : 61u) {
        std::vector<std::byte> part(whole.begin(),
                                    whole.begin() + static_cast<std::ptrdiff_t>(cut));
        std::string path = dir.file("cut.pt");
        testing::write_file_bytes(path, part);
        try {
            io::File file = io::File::open_read(path);
            container::TorchArchive archive = container::TorchArchive::open(file);
            // If the directory survived, reading data.pkl must still be checked.
            archive.read_record(file, archive.require("data.pkl"), 1 << 20);
            for (const auto& record : archive.records())
                archive.data_offset(file, record);
            FAIL() << "truncation at " << cut << " was not detected";
        } catch (const Error& error) {
            EXPECT_NE(std::string(error.what()).find("cut.pt"), std::string::npos) << error.what();
        }
    }
}

TEST(ZipReader, CorruptDirectoryFieldsAreCleanErrors) {
    TempDir dir;
    auto whole = testing::read_file_bytes(testing::fixture_path(
        "z2_ws2_fp32/global_step2/zero_pp_rank_1_mp_rank_00_optim_states.pt"));
    // Flip every byte of the last 600 bytes (directory and end records), one at a time.
    std::size_t flagged = 0;
    for (std::size_t at = whole.size() - 600; at < whole.size(); ++at) {
        auto bytes = whole;
        bytes[at] ^= std::byte{0xFF};
        testing::write_file_bytes(dir.file("flip.pt"), bytes);
        try {
            io::File file = io::File::open_read(dir.file("flip.pt"));
            container::TorchArchive archive = container::TorchArchive::open(file);
            for (const auto& record : archive.records()) {
                if (record.size < (1u << 20))
                    archive.read_record(file, record, 1u << 20);
            }
        } catch (const Error&) {
            ++flagged;
        }
    }
    EXPECT_GT(flagged, 100u);  // most flips are detected; none may crash
}

}  // namespace
}  // namespace z2f
