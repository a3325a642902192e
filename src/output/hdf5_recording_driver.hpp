// An HDF5 virtual file driver that writes nothing to disk: it records the bytes the library
// writes, so that the HDF5 layout can be computed before the output file exists.
//
// `RecordedFile` is the file as the driver sees it: a sparse set of written byte ranges
// (latest bytes win, overlapping writes are merged), the end-of-address (EOA, how far the library
// has allocated) and end-of-file (EOF, how far the "file" extends). Reads of ranges nobody wrote
// return zeros, as a hole in a sparse POSIX file would. Memory is proportional to the bytes
// actually written, never to the EOA: a contiguous dataset whose storage is allocated early and
// never filled costs nothing but its address range.
//
// A range can be reserved for raw dataset data (`reserve_raw`): any bytes recorded there before
// (metadata written to space the library later freed and reused) are forgotten, and any later
// write into it is refused. This is how the layout guarantees that tensor bytes are written by
// our copy engine only and that no fixed region overlaps a tensor slot.
//
// The driver itself (`use_recording_driver`) is registered with HDF5 once per process. It is not
// thread-safe, and neither is the HDF5 build we link against.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include <hdf5.h>

namespace z2f::output::hdf5 {

class RecordedFile {
  public:
    // Records `bytes` at `offset`. Throws z2f::Error (kInternal) if the range touches a range
    // reserved for raw data.
    void write(std::uint64_t offset, std::span<const std::byte> bytes);
    // Fills `out` with the recorded bytes at `offset`, zeros where nothing was written.
    void read(std::uint64_t offset, std::span<std::byte> out) const;
    // See the header comment. Throws if `length` overflows the address space.
    void reserve_raw(std::uint64_t offset, std::uint64_t length);
    // Drops everything recorded at or beyond `size`, and sets EOF to `size`.
    void truncate(std::uint64_t size);
    // Back to an empty file (what opening with H5F_ACC_TRUNC means).
    void clear() noexcept;

    std::uint64_t eoa() const noexcept { return eoa_; }
    void set_eoa(std::uint64_t eoa) noexcept { eoa_ = eoa; }
    std::uint64_t eof() const noexcept { return eof_; }

    // Recorded bytes, and how many of them fall inside [offset, offset + length).
    std::uint64_t recorded_bytes() const noexcept { return recorded_bytes_; }
    std::uint64_t recorded_bytes_in(std::uint64_t offset, std::uint64_t length) const;
    std::size_t range_count() const noexcept { return ranges_.size(); }

    // The first error a driver callback ran into (callbacks cannot throw through HDF5's C code;
    // they store the message here and return a failure status). Empty when all went well.
    const std::string& driver_error() const noexcept { return driver_error_; }
    void note_driver_error(std::string message);

  private:
    // Removes recorded bytes inside [begin, end), splitting ranges that straddle the limits.
    void erase_range(std::uint64_t begin, std::uint64_t end);

    // Non-overlapping written ranges, keyed by start offset. Adjacent ranges are allowed (they
    // are joined when read), which keeps appends from copying ever-growing buffers.
    std::map<std::uint64_t, std::vector<std::byte>> ranges_;
    // Raw data ranges: start -> end, non-overlapping.
    std::map<std::uint64_t, std::uint64_t> reserved_;
    std::uint64_t recorded_bytes_ = 0;
    std::uint64_t eoa_ = 0;
    std::uint64_t eof_ = 0;
    std::string driver_error_;
};

// Makes `fapl` (a file access property list) use the recording driver with `file` as the
// storage. `file` must outlive every HDF5 file opened through `fapl`.
void use_recording_driver(hid_t fapl, RecordedFile& file);

}  // namespace z2f::output::hdf5
