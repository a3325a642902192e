#include "driver/execute/executor.hpp"

#include <algorithm>
#include <tuple>

#include "common/crc32.hpp"
#include "common/errors.hpp"
#include "common/wire_codec.hpp"
#include "driver/destination/inspection.hpp"
#include "driver/execute/task_copies.hpp"
#include "io/posix_file.hpp"

namespace z2f::driver {
namespace {

void write_regions(const io::File& file, const std::vector<run::ClippedRegion>& regions) {
    for (const run::ClippedRegion& region : regions) {
        file.write_all(region.offset, region.bytes);
    }
}

// fsync, then the final name: from here on the file is complete and --resume may trust it.
void publish(const std::string& output_dir, const run::OutputFileRecord& file, io::File& handle) {
    handle.sync();
    handle.drop_cache(0, file.layout.size);
    handle.close();
    io::rename_file(temp_path(output_dir, file.name()), final_path(output_dir, file));
}

}  // namespace

void note_shared_crcs(const plan::WriteTask& task, const output::OutputFileLayout& layout,
                      const std::vector<run::SlotPart>& parts, std::span<const std::uint32_t> crcs,
                      ExecuteReport& report) {
    if (!layout.has_crc_tail())
        return;
    for (std::size_t i = 0; i < parts.size(); ++i) {
        report.shared_crcs.push_back(
            {task.file, parts[i].slot, parts[i].skip, parts[i].length, crcs[i]});
    }
}

std::vector<std::uint32_t> join_slot_crcs(const run::OutputFileRecord& record, std::uint32_t file,
                                          const std::vector<SlotCrc>& all_crcs) {
    const output::OutputFileLayout& layout = record.layout;
    std::vector<const SlotCrc*> mine;
    for (const SlotCrc& entry : all_crcs) {
        if (entry.file == file)
            mine.push_back(&entry);
    }
    std::sort(mine.begin(), mine.end(), [](const SlotCrc* a, const SlotCrc* b) {
        return std::tie(a->slot, a->skip) < std::tie(b->slot, b->skip);
    });
    // Each slot's parts must tile it in order: their join is the slot's CRC.
    std::vector<std::uint32_t> crcs(layout.slots.size(), 0);
    std::vector<std::uint64_t> covered(layout.slots.size(), 0);
    for (const SlotCrc* part : mine) {
        if (part->slot >= crcs.size() || part->skip != covered[part->slot])
            throw_internal_error("slot CRC parts of '" + record.name() + "' do not tile slot " +
                                 std::to_string(part->slot));
        crcs[part->slot] = crc32_join(crcs[part->slot], part->crc, part->length);
        covered[part->slot] += part->length;
    }
    for (std::size_t s = 0; s < layout.slots.size(); ++s) {
        if (covered[s] != layout.slots[s].length ||
            (layout.slots[s].length == 0 &&
             std::none_of(mine.begin(), mine.end(),
                          [&](const SlotCrc* p) { return p->slot == s; })))
            throw_internal_error("missing slot CRCs for '" + record.name() + "'");
    }
    return crcs;
}

std::vector<SlotCrc> gather_slot_crcs(const mpi::Communicator& comm,
                                      const std::vector<SlotCrc>& mine) {
    WireWriter out;
    out.sequence(mine, [](WireWriter& w, const SlotCrc& crc) {
        w.u32(crc.file);
        w.u32(crc.slot);
        w.u64(crc.skip);
        w.u64(crc.length);
        w.u32(crc.crc);
    });
    std::vector<SlotCrc> all;
    for (const auto& bytes : comm.all_gather(out.bytes())) {
        WireReader in(bytes, "slot CRCs");
        std::vector<SlotCrc> crcs = in.sequence(28, [](WireReader& r) {
            SlotCrc crc;
            crc.file = r.u32();
            crc.slot = r.u32();
            crc.skip = r.u64();
            crc.length = r.u64();
            crc.crc = r.u32();
            return crc;
        });
        in.expect_end();
        all.insert(all.end(), crcs.begin(), crcs.end());
    }
    return all;
}

io::DirectCopyOptions copy_options(const Options& options) {
    io::DirectCopyOptions copy;
    copy.buffer_size = static_cast<std::size_t>(options.buffer_size);
    copy.block_size = static_cast<std::size_t>(options.block_size);
    copy.read_mode = options.read_mode;
    copy.direct_writes = options.io == IoBackend::kDirect;
    return copy;
}

void finalize_shared_file(const run::RunPlan& plan, const std::string& output_dir,
                          std::uint32_t file, const std::vector<SlotCrc>& all_crcs) {
    const run::OutputFileRecord& record = plan.files.at(file);
    const output::OutputFileLayout& layout = record.layout;
    io::File handle = io::File::open_write(temp_path(output_dir, record.name()));
    if (layout.has_crc_tail())
        write_regions(handle, run::clip_regions(
                                  output::crc_tail(layout, join_slot_crcs(record, file, all_crcs)),
                                  0, layout.size));
    publish(output_dir, record, handle);
}

void remove_temp_files(const run::RunPlan& plan, const RankTarget& target,
                       const ExecuteReport& report) noexcept {
    std::vector<std::string> paths = report.temp_files;
    for (std::uint32_t f = 0; f < plan.files.size(); ++f) {
        // Leads of shared files also clean the temp files other ranks opened.
        if (plan.is_shared(f) && plan.lead_of(f).rank == target.rank)
            paths.push_back(temp_path(target.output_dir, plan.files[f].name()));
    }
    for (const std::string& path : paths) {
        try {
            io::remove_file(path);
        } catch (...) {
            // Best effort: a temp name never looks like a final output.
        }
    }
}

std::vector<VerifyFinding> verify_shared_tails(const run::RunPlan& plan, const RankTarget& target,
                                               const std::vector<SlotCrc>& all_crcs) {
    std::vector<VerifyFinding> findings;
    for (std::uint32_t f = 0; f < plan.files.size(); ++f) {
        const run::OutputFileRecord& record = plan.files[f];
        if (!plan.is_shared(f) || record.skip || !record.layout.has_crc_tail() ||
            plan.lead_of(f).rank != target.rank)
            continue;
        io::File file = io::File::open_read(final_path(target.output_dir, record));
        const std::vector<output::FixedRegion> tail =
            output::crc_tail(record.layout, join_slot_crcs(record, f, all_crcs));
        for (const run::ClippedRegion& region : run::clip_regions(tail, 0, record.layout.size)) {
            std::vector<std::byte> found(region.bytes.size());
            file.read_exact(region.offset, found);
            if (!std::equal(found.begin(), found.end(), region.bytes.begin())) {
                findings.push_back({f, "zip directory bytes at offset " +
                                           std::to_string(region.offset) + " differ"});
            }
        }
    }
    return findings;
}

}  // namespace z2f::driver
