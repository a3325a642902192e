#include "output/hdf5_recording_driver.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/errors.hpp"
#include "output/hdf5_api.hpp"

namespace z2f::output::hdf5 {
namespace {

std::vector<std::byte> filled(std::size_t count, std::uint8_t value) {
    return std::vector<std::byte>(count, static_cast<std::byte>(value));
}

std::vector<std::byte> read(const RecordedFile& file, std::uint64_t offset, std::size_t count) {
    std::vector<std::byte> out(count, std::byte{0xEE});
    file.read(offset, out);
    return out;
}

std::vector<std::byte> concat(std::initializer_list<std::vector<std::byte>> parts) {
    std::vector<std::byte> out;
    for (const auto& part : parts) {
        out.insert(out.end(), part.begin(), part.end());
    }
    return out;
}

TEST(RecordedFile, UnwrittenBytesReadAsZero) {
    RecordedFile file;
    EXPECT_EQ(read(file, 1000, 16), filled(16, 0));
    file.write(4, filled(4, 0xAA));
    EXPECT_EQ(read(file, 0, 12), concat({filled(4, 0), filled(4, 0xAA), filled(4, 0)}));
    EXPECT_EQ(file.recorded_bytes(), 4u);
    EXPECT_EQ(file.eof(), 8u);
}

TEST(RecordedFile, LatestWriteWinsAndOverlapsMerge) {
    RecordedFile file;
    file.write(0, filled(4, 0x11));
    file.write(8, filled(4, 0x22));
    EXPECT_EQ(file.range_count(), 2u);
    // Overlaps the tail of the first range, the gap, and the head of the second.
    file.write(2, filled(8, 0x33));
    EXPECT_EQ(file.range_count(), 1u);
    EXPECT_EQ(file.recorded_bytes(), 12u);
    EXPECT_EQ(read(file, 0, 12), concat({filled(2, 0x11), filled(8, 0x33), filled(2, 0x22)}));
    // A rewrite inside a range changes bytes in place.
    file.write(5, filled(2, 0x44));
    EXPECT_EQ(file.range_count(), 1u);
    EXPECT_EQ(read(file, 4, 4), concat({filled(1, 0x33), filled(2, 0x44), filled(1, 0x33)}));
    // A write covering everything replaces it.
    file.write(0, filled(20, 0x55));
    EXPECT_EQ(file.range_count(), 1u);
    EXPECT_EQ(file.recorded_bytes(), 20u);
    EXPECT_EQ(read(file, 0, 20), filled(20, 0x55));
}

TEST(RecordedFile, AdjacentWritesStaySeparateButReadJoined) {
    RecordedFile file;
    file.write(0, filled(4, 0x01));
    file.write(4, filled(4, 0x02));
    EXPECT_EQ(file.range_count(), 2u);
    EXPECT_EQ(read(file, 2, 4), concat({filled(2, 0x01), filled(2, 0x02)}));
    EXPECT_EQ(file.recorded_bytes_in(2, 4), 4u);
    EXPECT_EQ(file.recorded_bytes_in(6, 10), 2u);
}

TEST(RecordedFile, ReservedRawRangesDropStaleBytesAndRefuseWrites) {
    RecordedFile file;
    file.write(0, filled(16, 0x77));
    file.reserve_raw(4, 8);  // [4, 12)
    EXPECT_EQ(file.recorded_bytes(), 8u);
    EXPECT_EQ(file.recorded_bytes_in(4, 8), 0u);
    EXPECT_EQ(read(file, 0, 16), concat({filled(4, 0x77), filled(8, 0), filled(4, 0x77)}));
    EXPECT_THROW(file.write(11, filled(1, 0x01)), Error);
    EXPECT_THROW(file.write(0, filled(5, 0x01)), Error);
    EXPECT_THROW(file.write(0, filled(32, 0x01)), Error);
    EXPECT_NO_THROW(file.write(12, filled(4, 0x01)));
    EXPECT_NO_THROW(file.write(0, filled(4, 0x01)));
    // Two datasets never share storage.
    EXPECT_THROW(file.reserve_raw(10, 4), Error);
    EXPECT_NO_THROW(file.reserve_raw(100, 0));
}

TEST(RecordedFile, TruncateDropsBytesBeyondTheEnd) {
    RecordedFile file;
    file.write(0, filled(10, 0x10));
    file.write(20, filled(10, 0x20));
    file.truncate(25);
    EXPECT_EQ(file.eof(), 25u);
    EXPECT_EQ(file.recorded_bytes(), 15u);
    EXPECT_EQ(read(file, 20, 10), concat({filled(5, 0x20), filled(5, 0)}));
    file.clear();
    EXPECT_EQ(file.recorded_bytes(), 0u);
    EXPECT_EQ(file.eof(), 0u);
}

TEST(RecordedFile, RangesOverflowingTheAddressSpaceAreRefused) {
    RecordedFile file;
    EXPECT_THROW(file.write(UINT64_MAX - 1, filled(4, 0)), Error);
    EXPECT_THROW(file.reserve_raw(UINT64_MAX - 1, 4), Error);
}

// ---------------------------------------------------------------------------------------------
// The driver, driven by the HDF5 library

Handle recording_fapl(RecordedFile& file) {
    Handle fapl = checked(H5Pcreate(H5P_FILE_ACCESS), H5Pclose, "fapl");
    use_recording_driver(fapl.get(), file);
    return fapl;
}

TEST(RecordingDriver, AFileBuiltInMemoryReopensThroughTheDriver) {
    QuietErrors quiet;
    RecordedFile recorded;
    {
        Handle fapl = recording_fapl(recorded);
        Handle file =
            checked(H5Fcreate("memory.h5", create_truncate_flag(), default_plist(), fapl.get()),
                    H5Fclose, "create");
        const hsize_t count = 3;
        Handle space = checked(H5Screate_simple(1, &count, nullptr), H5Sclose, "space");
        Handle dataset = checked(H5Dcreate2(file.get(), "values", H5T_STD_I32LE, space.get(),
                                            default_plist(), default_plist(), default_plist()),
                                 H5Dclose, "dataset");
        const std::int32_t values[3] = {7, -8, 9};
        check(H5Dwrite(dataset.get(), H5T_NATIVE_INT32, all_selection(), all_selection(),
                       default_plist(), values),
              "write");
        dataset.close("close dataset");
        file.close("close file");
    }
    EXPECT_TRUE(recorded.driver_error().empty()) << recorded.driver_error();
    EXPECT_GT(recorded.eof(), 0u);
    EXPECT_EQ(recorded.eof(), recorded.eoa());
    std::vector<std::byte> signature(8);
    recorded.read(0, signature);
    EXPECT_EQ(std::memcmp(signature.data(), "\x89HDF\r\n\x1a\n", 8), 0);

    // Opening without H5F_ACC_TRUNC keeps the recorded bytes: the library reads its own file.
    Handle fapl = recording_fapl(recorded);
    Handle file = checked(H5Fopen("memory.h5", read_only_flag(), fapl.get()), H5Fclose, "reopen");
    Handle dataset =
        checked(H5Dopen2(file.get(), "values", default_plist()), H5Dclose, "open dataset");
    std::int32_t values[3] = {};
    check(H5Dread(dataset.get(), H5T_NATIVE_INT32, all_selection(), all_selection(),
                  default_plist(), values),
          "read");
    EXPECT_EQ(values[0], 7);
    EXPECT_EQ(values[1], -8);
    EXPECT_EQ(values[2], 9);
}

TEST(RecordingDriver, WritesIntoReservedDataFailWithTheDriversReason) {
    QuietErrors quiet;
    RecordedFile recorded;
    Handle fapl = recording_fapl(recorded);
    Handle file =
        checked(H5Fcreate("memory.h5", create_truncate_flag(), default_plist(), fapl.get()),
                H5Fclose, "create");
    Handle dcpl = checked(H5Pcreate(H5P_DATASET_CREATE), H5Pclose, "dcpl");
    check(H5Pset_layout(dcpl.get(), H5D_CONTIGUOUS), "layout");
    check(H5Pset_alloc_time(dcpl.get(), H5D_ALLOC_TIME_EARLY), "alloc time");
    check(H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER), "fill time");
    const hsize_t count = 4096;
    Handle space = checked(H5Screate_simple(1, &count, nullptr), H5Sclose, "space");
    Handle dataset = checked(H5Dcreate2(file.get(), "data", H5T_STD_U8LE, space.get(),
                                        default_plist(), dcpl.get(), default_plist()),
                             H5Dclose, "dataset");
    const haddr_t offset = H5Dget_offset(dataset.get());
    ASSERT_NE(offset, undefined_address());
    EXPECT_EQ(recorded.recorded_bytes_in(offset, count), 0u) << "fill time never: no data write";
    recorded.reserve_raw(offset, count);

    const std::vector<std::uint8_t> bytes(count, 0xAB);
    EXPECT_LT(H5Dwrite(dataset.get(), H5T_NATIVE_UINT8, all_selection(), all_selection(),
                       default_plist(), bytes.data()),
              0);
    EXPECT_NE(recorded.driver_error().find("into the data of a tensor dataset"), std::string::npos)
        << recorded.driver_error();
    H5Eclear2(default_error_stack());
}

TEST(Hdf5Api, FailuresCarryHdf5sErrorStack) {
    QuietErrors quiet;
    try {
        Handle file =
            checked(H5Fopen("/nonexistent-z2f-dir/missing.h5", read_only_flag(), default_plist()),
                    H5Fclose, "opening the missing file");
        ADD_FAILURE() << "opened a missing file";
    } catch (const Error& error) {
        const std::string message = error.what();
        EXPECT_EQ(error.kind(), ErrorKind::kInternal);
        EXPECT_EQ(message.rfind("HDF5: opening the missing file; ", 0), 0u) << message;
        EXPECT_NE(message.find("H5Fopen"), std::string::npos) << message;
        EXPECT_EQ(message.find('\n'), std::string::npos) << "one line: " << message;
    }
}

}  // namespace
}  // namespace z2f::output::hdf5
