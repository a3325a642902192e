#include "container/zip_writer.hpp"

#include <filesystem>
#include <string>
#include <system_error>
#include <unistd.h>
#include <vector>

#include <gtest/gtest.h>

#include "common/bytes.hpp"
#include "common/crc32.hpp"
#include "common/errors.hpp"
#include "io/posix_file.hpp"
#include "support/zip_inspect.hpp"

namespace z2f::container::zip {
namespace {

namespace fs = std::filesystem;

std::vector<std::byte> read_file(const std::string& path) {
    std::string text = io::read_small_file(path, std::size_t{1} << 30);
    auto bytes = as_byte_span(text);
    return {bytes.begin(), bytes.end()};
}

// A per-test scratch directory, removed with everything in it when the test ends.
class ScratchDir {
  public:
    ScratchDir()
        : dir_(fs::temp_directory_path() / ("z2f_zip_test_" + std::to_string(::getpid()))) {
        fs::create_directories(dir_);
    }
    ~ScratchDir() {
        std::error_code ignored;
        fs::remove_all(dir_, ignored);
    }
    std::string path(const std::string& name) const { return (dir_ / name).string(); }

  private:
    fs::path dir_;
};

std::vector<std::byte> bytes_of(std::string_view text) {
    auto span = as_byte_span(text);
    return {span.begin(), span.end()};
}

TEST(TorchPadding, MatchesTorchFiles) {
    // Offsets, names and sizes of records in files torch 1.13 wrote, and the FB padding it chose.
    EXPECT_EQ(torch_padding(0, 22, 472), 8u);   // pytorch_model/data.pkl
    EXPECT_EQ(torch_padding(357, 10, 0), 47u);  // x.y/data/0, an empty record
    EXPECT_EQ(torch_padding(448, 10, 4), 20u);
    EXPECT_EQ(torch_padding(532, 10, 0), 0u);  // already aligned: no 'Z' at all
}

TEST(TorchPadding, Zip64Cases) {
    // start = offset + 30 + name + 4, +4 +16 for a large size, +4 +8 for a large offset.
    EXPECT_EQ(torch_padding(0, 10, 0xFFFFFFFEu), 20u);  // 44 -> 64: not large yet
    EXPECT_EQ(torch_padding(0, 10, 0xFFFFFFFFu), 0u);   // 44 + 20 = 64
    EXPECT_EQ(torch_padding(0, 10, std::uint64_t{5} << 30), 0u);
    EXPECT_EQ(torch_padding(0, 11, 0xFFFFFFFFu), 63u);            // 65 -> 128
    EXPECT_EQ(torch_padding(0xFFFFFFFEu, 10, 1), 22u);            // 2^32 + 42 -> 2^32 + 64
    EXPECT_EQ(torch_padding(0xFFFFFFFFu, 10, 1), 9u);             // 2^32 - 1 + 56 = 2^32 + 55
    EXPECT_EQ(torch_padding(std::uint64_t{1} << 32, 10, 5), 8u);  // +56
    EXPECT_EQ(torch_padding(std::uint64_t{1} << 32, 10, std::uint64_t{1} << 32), 56u);  // +72
}

TEST(RecordPlacement, SmallRecord) {
    RecordPlacement r = place_record(0, "pytorch_model/data.pkl", 472);
    EXPECT_EQ(r.padding, 8u);
    EXPECT_EQ(r.local_extra_size(), 12u);
    EXPECT_EQ(r.data_offset(), 64u);
    EXPECT_EQ(r.descriptor_size(), 16u);
    EXPECT_EQ(r.end_offset(), 64u + 472 + 16);
    EXPECT_EQ(r.central_header_size(), 46u + 22);
    EXPECT_EQ(r.flags(), 0x0808);
    RecordPlacement empty = place_record(357, "x.y/data/0", 0);
    EXPECT_EQ(empty.flags(), 0x0800);
    EXPECT_EQ(empty.descriptor_size(), 0u);
    EXPECT_EQ(empty.end_offset(), 448u);
    EXPECT_THROW(place_record(0, "", 1), Error);
    EXPECT_THROW(place_record(0, std::string(70000, 'a'), 1), Error);
}

TEST(RecordPlacement, Zip64HeaderBytes) {
    // A 8 GiB record whose header sits at 4 GiB: both zip64 fields, 24-byte descriptor.
    const std::uint64_t offset = std::uint64_t{1} << 32;
    const std::uint64_t size = std::uint64_t{8} << 30;
    RecordPlacement r = place_record(offset, "a/data/0", size);
    EXPECT_TRUE(r.zip64_size());
    EXPECT_TRUE(r.zip64_offset());
    EXPECT_EQ(r.local_zip64_size(), 28u);
    EXPECT_EQ(r.padding, (64 - (30 + 8 + 4 + 28) % 64) % 64);
    EXPECT_EQ(r.data_offset() % 64, 0u);
    EXPECT_EQ(r.descriptor_size(), 24u);

    ByteWriter expected;
    expected.put(std::uint32_t{0x04034b50});
    expected.put(std::uint16_t{0});
    expected.put(std::uint16_t{0x0808});
    for (int i = 0; i < 3; ++i)
        expected.put(std::uint16_t{0});
    for (int i = 0; i < 3; ++i)
        expected.put(std::uint32_t{0});
    expected.put(std::uint16_t{8});
    expected.put(static_cast<std::uint16_t>(28 + 4 + r.padding));
    expected.put_text("a/data/0");
    expected.put(std::uint16_t{1});
    expected.put(std::uint16_t{24});
    expected.put(size);
    expected.put(std::uint64_t{0});  // compressed size: 0 in the local header, as miniz writes
    expected.put(offset);
    expected.put_text("FB");
    expected.put(static_cast<std::uint16_t>(r.padding));
    expected.put_repeated(std::byte{'Z'}, r.padding);
    ByteWriter local;
    write_local_header(local, "a/data/0", r);
    EXPECT_EQ(local.bytes(), expected.bytes());
    EXPECT_EQ(local.size(), r.local_header_size());

    ByteWriter descriptor;
    write_data_descriptor(descriptor, r, 0xDEADBEEF);
    ByteWriter expected_descriptor;
    expected_descriptor.put(std::uint32_t{0x08074b50});
    expected_descriptor.put(std::uint32_t{0xDEADBEEF});
    expected_descriptor.put(size);
    expected_descriptor.put(size);
    EXPECT_EQ(descriptor.bytes(), expected_descriptor.bytes());

    ByteWriter central;
    write_central_header(central, "a/data/0", r, 0xDEADBEEF);
    ASSERT_EQ(central.size(), r.central_header_size());
    const std::byte* c = central.bytes().data();
    EXPECT_EQ(load_le<std::uint32_t>(c + 20), 0xFFFFFFFFu);  // compressed size
    EXPECT_EQ(load_le<std::uint32_t>(c + 24), 0xFFFFFFFFu);  // uncompressed size
    EXPECT_EQ(load_le<std::uint16_t>(c + 30), 28u);          // extra length
    EXPECT_EQ(load_le<std::uint32_t>(c + 42), 0xFFFFFFFFu);  // local header offset
    EXPECT_EQ(load_le<std::uint16_t>(c + 46 + 8), 1u);
    EXPECT_EQ(load_le<std::uint16_t>(c + 46 + 10), 24u);
    EXPECT_EQ(load_le<std::uint64_t>(c + 46 + 12), size);
    EXPECT_EQ(load_le<std::uint64_t>(c + 46 + 20), size);
    EXPECT_EQ(load_le<std::uint64_t>(c + 46 + 28), offset);
}

TEST(RecordPlacement, OnlyTheLargeFieldsGoInTheZip64Extra) {
    RecordPlacement big_offset = place_record(std::uint64_t{5} << 30, "a/version", 2);
    EXPECT_EQ(big_offset.local_zip64_size(), 12u);
    EXPECT_EQ(big_offset.descriptor_size(), 24u);  // any zip64 field means 8-byte sizes
    ByteWriter central;
    write_central_header(central, "a/version", big_offset, 1);
    EXPECT_EQ(load_le<std::uint32_t>(central.bytes().data() + 24), 2u);
    EXPECT_EQ(load_le<std::uint16_t>(central.bytes().data() + 46 + 9 + 2), 8u);

    RecordPlacement big_size = place_record(0, "a/data/0", 0xFFFFFFFFu);
    EXPECT_EQ(big_size.local_zip64_size(), 20u);
}

TEST(EndRecords, SmallAndLarge) {
    ByteWriter small;
    write_end_records(small, 7, 0x3452, 0x1d1);
    // The end of a torch 1.13 file with 7 records (see tests/data .../z3_ws2_tied_fp32).
    EXPECT_EQ(small.size(), kEndRecordsSize);
    const std::byte* e = small.bytes().data();
    EXPECT_EQ(load_le<std::uint64_t>(e + 4), 44u);
    EXPECT_EQ(load_le<std::uint16_t>(e + 12), 0x031Eu);
    EXPECT_EQ(load_le<std::uint16_t>(e + 14), 45u);
    EXPECT_EQ(load_le<std::uint64_t>(e + 56 + 8), 0x3452u + 0x1d1);
    EXPECT_EQ(load_le<std::uint16_t>(e + 76 + 8), 7u);
    EXPECT_EQ(load_le<std::uint32_t>(e + 76 + 16), 0x3452u);

    ByteWriter large;
    write_end_records(large, 70000, std::uint64_t{6} << 30, 100);
    const std::byte* l = large.bytes().data();
    EXPECT_EQ(load_le<std::uint64_t>(l + 24), 70000u);
    EXPECT_EQ(load_le<std::uint16_t>(l + 76 + 8), 0xFFFFu);
    EXPECT_EQ(load_le<std::uint32_t>(l + 76 + 12), 100u);
    EXPECT_EQ(load_le<std::uint32_t>(l + 76 + 16), 0xFFFFFFFFu);
}

TEST(TorchArchiveName, StemOfTheFileName) {
    EXPECT_EQ(torch_archive_name("out/pytorch_model-00001-of-00002.bin"),
              "pytorch_model-00001-of-00002");
    EXPECT_EQ(torch_archive_name("pytorch_model.bin"), "pytorch_model");
    EXPECT_EQ(torch_archive_name("x.y.bin"), "x.y");  // torch strips the last extension only
    EXPECT_EQ(torch_archive_name("dir.d/noext"), "noext");
    EXPECT_EQ(torch_archive_name(".bin"), "archive");
}

// torch 1.13 wrote these files; writing the same records with TorchZipWriter must reproduce
// them byte for byte (same padding, flags, descriptors, central directory and end records).
TEST(TorchZipWriter, ReproducesTorchFilesByteForByte) {
    ScratchDir scratch;
    std::size_t checked = 0;
    for (const auto& fixture : fs::directory_iterator(Z2F_TEST_DATA "/deepspeed")) {
        fs::path ref = fixture.path() / "ref";
        if (!fs::is_directory(ref))
            continue;
        for (const auto& variant : fs::directory_iterator(ref)) {
            if (!variant.is_directory())
                continue;
            for (const auto& file : fs::directory_iterator(variant.path())) {
                if (file.path().extension() != ".bin")
                    continue;
                std::vector<std::byte> original = read_file(file.path().string());
                auto source = test::bytes_source(original);
                test::ZipArchiveInfo info = test::inspect_zip(source, original.size());
                test::check_crcs(source, info);

                std::string copy = scratch.path("copy.bin");
                std::string archive = torch_archive_name(file.path().filename().string());
                TorchZipWriter writer(copy, archive);
                for (const auto& record : info.records) {
                    ASSERT_EQ(record.padding, torch_padding(record.local_header_offset,
                                                            record.name.size(), record.size));
                    std::vector<std::byte> data = source(record.data_offset, record.size);
                    writer.add_record(record.name.substr(archive.size() + 1), data);
                }
                writer.finish();
                EXPECT_EQ(read_file(copy), original) << file.path();
                ++checked;
            }
        }
    }
    EXPECT_GE(checked, 10u);
}

TEST(TorchZipWriter, StreamsRecordsAndAddsVersion) {
    ScratchDir scratch;
    std::string path = scratch.path("stream.bin");
    const std::uint64_t big = (std::uint64_t{4} << 20) * 2 + 12345;  // several 4 MiB chunks
    auto pattern = [](std::uint64_t i) { return static_cast<std::byte>((i * 2654435761u) >> 24); };
    {
        TorchZipWriter writer(path);
        EXPECT_EQ(writer.archive_name(), "stream");
        writer.add_record("data.pkl", bytes_of("not really a pickle"));
        writer.add_record("byteorder", bytes_of("little"));
        writer.add_record_from("data/0", big, [&](std::uint64_t at, std::span<std::byte> out) {
            for (std::size_t i = 0; i < out.size(); ++i)
                out[i] = pattern(at + i);
        });
        writer.add_record("data/1", {});
        EXPECT_THROW(writer.add_record("data/1", {}), Error);
        writer.finish();
        EXPECT_THROW(writer.add_record("late", {}), Error);
    }
    std::vector<std::byte> file = read_file(path);
    auto source = test::bytes_source(file);
    test::ZipArchiveInfo info = test::inspect_zip(source, file.size());
    test::check_crcs(source, info);
    ASSERT_EQ(info.records.size(), 5u);
    EXPECT_EQ(info.records[2].name, "stream/data/0");
    EXPECT_EQ(info.records[2].size, big);
    EXPECT_EQ(info.records[3].flags, 0x0800);  // empty: no data descriptor
    EXPECT_EQ(info.records[4].name, "stream/version");
    EXPECT_EQ(source(info.records[4].data_offset, 2), bytes_of("3\n"));

    // The streamed record equals the one-shot one.
    std::vector<std::byte> whole(big);
    for (std::uint64_t i = 0; i < big; ++i)
        whole[i] = pattern(i);
    EXPECT_EQ(info.records[2].crc, crc32_of(whole));
}

TEST(TorchZipWriter, ZeroRecordsAreHolesWithTheCrcOfZeros) {
    ScratchDir scratch;
    std::string path = scratch.path("sparse.bin");
    const std::uint64_t hole = std::uint64_t{64} << 20;
    {
        TorchZipWriter writer(path);
        writer.add_record("data.pkl", bytes_of("pickle"));
        writer.add_zero_record("data/0", hole);
        writer.add_record("data/1", bytes_of("tail"));
        writer.finish();
    }
    std::vector<std::byte> file = read_file(path);
    auto source = test::bytes_source(file);
    test::ZipArchiveInfo info = test::inspect_zip(source, file.size());
    test::check_crcs(source, info);
    ASSERT_EQ(info.records.size(), 4u);
    EXPECT_EQ(info.records[1].size, hole);
    EXPECT_EQ(info.records[1].crc, crc32_of_zeros(hole));
    // The data region was never written: far fewer blocks than bytes.
    EXPECT_LT(io::allocated_bytes(path), hole / 8);
}

TEST(TorchZipWriter, KeepsAnExplicitVersionRecord) {
    ScratchDir scratch;
    std::string path = scratch.path("explicit.bin");
    {
        TorchZipWriter writer(path, "archive");
        writer.add_record("data.pkl", bytes_of("x"));
        writer.add_record("version", bytes_of("3\n"));
        writer.finish();
    }
    std::vector<std::byte> file = read_file(path);
    test::ZipArchiveInfo info = test::inspect_zip(test::bytes_source(file), file.size());
    ASSERT_EQ(info.records.size(), 2u);
    EXPECT_EQ(info.records[1].name, "archive/version");
}

}  // namespace
}  // namespace z2f::container::zip
