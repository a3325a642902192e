// The input CRC check: which bytes of which input records each rank checksums, and how the
// pieces join into each record's CRC-32.
//
// Every stored zip record of an input that a run reads tensor bytes from (an fp32 master
// partition, a frozen parameter, a buffer, a moment) is checked against the CRC-32 of its zip
// directory entry. The bytes are checksummed where they are read anyway: a record whose
// tensors several ranks copy is cut into pieces, one per range a copy reads first, and each
// rank checksums its pieces while the bytes are in its buffer. A copy's run of extents that
// follow one another in the file (the rows of a row-parallel weight's shard) is one range and
// one piece, so the plan grows with the tensors and ranks, not with the rows. The bytes of a record
// that no copy reads (alignment padding, tensors not selected, TP replicas only compared) are
// pieces too, read for the check alone by the record's checker: the rank of its first copied piece.
// The pieces of a record cover it exactly once, in file order, so its CRC is their join
// (crc32_join); only the pieces' CRCs cross MPI.
//
//   record R = [offset, offset + length) of input file F
//     pieces  [o0, o1) [o1, o2) ... [ok, offset + length)   each: (rank, read while copying?)
//     crc(R)  = join(join(crc(p0), crc(p1), len(p1)), ...)
//
// A record whose directory entry says CRC 0 was written without CRCs (torch's
// `_set_crc32_options(False)`): it is listed, reported once, and not checked. Files marked
// `skip` (complete from an earlier run, or not compared by --verify) read nothing, so records
// only they read are not checked again. Pure: every rank computes the same value.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/extent.hpp"
#include "run/run_plan.hpp"

namespace z2f::run {

struct CheckPiece {
    std::uint32_t record = 0;  // index into plan.tensors.records
    std::uint64_t offset = 0;  // absolute input-file offset
    std::uint64_t length = 0;
    std::uint32_t rank = 0;   // who checksums it
    bool extra_read = false;  // no copy reads these bytes: read for the check alone

    friend bool operator==(const CheckPiece&, const CheckPiece&) = default;
};

struct CheckedRecord {
    std::uint32_t record = 0;  // index into plan.tensors.records
    std::uint32_t first_piece = 0;
    std::uint32_t piece_count = 0;
    std::vector<std::uint32_t> tensors;  // plan tensors read from it (ascending), for messages
    std::vector<std::uint32_t> files;    // output files holding bytes of it (ascending)
};

struct InputCheckPlan {
    std::vector<CheckPiece> pieces;  // record by record, each record's in file order
    std::vector<CheckedRecord> records;
    std::vector<std::uint32_t> without_crc;  // records read from whose CRC is 0: not checked
    // The pieces the copy of a task's part of a slot reads (task_parts.hpp; CrcRange::extent
    // indexes the part's extents), keyed by slot_key(task, slot), in read order.
    std::unordered_map<std::uint64_t, std::vector<CrcRange>> slot_ranges;

    static std::uint64_t slot_key(std::uint32_t task, std::uint32_t slot) noexcept {
        return (std::uint64_t{task} << 32) | slot;
    }
    const std::vector<CrcRange>* ranges_of(std::uint32_t task, std::uint32_t slot) const;
    // Bytes read for the check alone, by all ranks.
    std::uint64_t extra_bytes() const noexcept;
};

InputCheckPlan plan_input_check(const RunPlan& plan);

// The warning a run gives once when some zip records it reads were written with torch's CRC
// computation off (CRC 0), so their bytes cannot be checked; nullopt when there are none. Files
// in torch's legacy format, which have no CRCs at all, are the plan's own warning (run_plan.cpp).
std::optional<std::string> unchecked_records_warning(const RunPlan& plan,
                                                     const InputCheckPlan& check);

// A checked record whose pieces do not join into its CRC.
struct FailedRecord {
    std::uint32_t record = 0;  // index into plan.tensors.records
    std::uint32_t expected = 0;
    std::uint32_t actual = 0;
    std::size_t checked = 0;  // index into check.records
};

// Joins the pieces' CRCs (`piece_crcs`, indexed like check.pieces) record by record.
std::vector<FailedRecord> failed_records(const InputCheckPlan& check,
                                         const std::vector<InputRecord>& records,
                                         const std::vector<std::uint32_t>& piece_crcs);

// "input '<path>': record '<name>' (the bytes of 'a', 'b' and 3 more tensors) fails its CRC-32
// check: ...", with a count of the other failed records.
std::string describe_failed_records(const RunPlan& plan, const InputCheckPlan& check,
                                    const std::vector<FailedRecord>& failed);

}  // namespace z2f::run
