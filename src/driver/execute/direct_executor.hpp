// The execute phase's (and --verify's) work on one rank, through the direct-I/O engine
// (io/direct_copier.hpp, docs/io-engine.md): every task's byte range streamed in aligned blocks
// (O_DIRECT, or through the page cache with --io buffered or where the file system refuses
// O_DIRECT), file after file.
//
// Writing: a file written by one task is renamed to its final name once the writer reports it
// on disk (its size, fdatasync and close succeeded: its size and fdatasync overlap the next
// files' writes); a file shared by several ranks is left to its lead (finalize_shared_file),
// its CRC-dependent bytes written as zeros here and patched then. A failure keeps the files
// already on disk.
//
// Comparing (--verify): the same ranges, built the same way, are compared with the files under
// their final names instead of written; each difference is named by what it hits (a tensor,
// header bytes, the zip directory). The CRC-dependent bytes of shared files are compared by
// their leads (verify_shared_tails), once every rank's slot CRCs are known.
#pragma once

#include <vector>

#include "driver/execute/executor.hpp"
#include "io/direct_copier.hpp"

namespace z2f::driver {

void execute_tasks(const run::RunPlan& plan, const RankTarget& target, io::InputFiles& inputs,
                   const io::DirectCopyOptions& options, ExecuteReport& report, InputCheck* check);

// Compares this rank's tasks of the files not marked `skip` (the caller found them missing or
// of the wrong size) with the files; only reads. `shared_crcs` gets the slot CRCs of this
// rank's parts of shared torch zip files, for verify_shared_tails.
std::vector<VerifyFinding> verify_tasks(const run::RunPlan& plan, const RankTarget& target,
                                        io::InputFiles& inputs, io::DirectCopyOptions options,
                                        InputCheck* check, std::vector<SlotCrc>& shared_crcs);

}  // namespace z2f::driver
