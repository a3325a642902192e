// The execute phase on one rank with the direct-I/O engine (--io direct, the default;
// io/direct_copier.hpp, docs/io-engine.md): every task's byte range streamed in aligned blocks
// with O_DIRECT, file after file. A file written by one task is renamed to its final name once
// the writer reports it on disk (its size and fdatasync overlap the next files' writes); a file
// shared by several ranks is left to its lead (finalize_shared_file), its CRC-dependent bytes
// written as zeros here and patched then. A failure keeps the files already on disk.
#pragma once

#include "driver/executor.hpp"
#include "io/direct_copier.hpp"

namespace z2f::driver {

void execute_tasks_direct(const run::RunPlan& plan, const RankTarget& target,
                          io::InputFiles& inputs, const io::DirectCopyOptions& options,
                          ExecuteReport& report, InputCheck* check);

}  // namespace z2f::driver
