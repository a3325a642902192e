// Fault sweeps: every I/O call of a conversion made to fail in turn (io/call_hook.hpp).
//
// For each case (an output format, a write path) a clean conversion is run once with a counting
// hook: how many opens, reads, writes, syncs, ... each rank makes on the checkpoint and the
// output. Then, for every one of those calls on every rank (sampled where there are many), a
// conversion into a fresh folder with that one call failing (EIO; ENOSPC on writes, syncs and
// sizes), and after it:
//   - it failed with an I/O, input or output error whose message names a path, or it succeeded
//     (a call whose failure costs nothing, such as an advisory reservation) with every byte
//     right; a failed write, sync or rename of an output file always fails the run;
//   - every file under a final name is byte-identical to the clean run's (the run record
//     excepted, which says "writing"), and the index or latest_universal exists only when every
//     planned file does;
//   - --resume without the fault ends with the clean run's tree, byte for byte: nothing the
//     failed run left behind blocks it.
// Short transfers and EINTR on every kind of call end in success with the clean run's bytes.
// CTest runs this binary with mpiexec -n 1 and -n 2; every test is collective.
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <mpi.h>

#include "driver/destination/run_record.hpp"
#include "io/call_hook.hpp"
#include "mpi_support.hpp"
#include "output/hdf5_module.hpp"
#include "support/fault_plan.hpp"
#include "support/test_files.hpp"

namespace z2f {
namespace {

namespace fs = std::filesystem;
using io::IoCall;
using mpi_test::barrier;
using mpi_test::root;
using testing::FaultPlan;
using testing::FaultTrigger;
using testing::ScopedCallHook;

int world_size() {
    int size = 1;
    int initialised = 0;
    MPI_Initialized(&initialised);
    if (initialised != 0)
        MPI_Comm_size(MPI_COMM_WORLD, &size);
    return size;
}

// Every rank's counts, by rank then call kind (collective).
std::vector<std::array<std::uint64_t, io::kIoCallCount>> gather_counts(const FaultPlan& plan) {
    std::array<std::uint64_t, io::kIoCallCount> mine{};
    for (int k = 0; k < io::kIoCallCount; ++k)
        mine[static_cast<std::size_t>(k)] = plan.count(static_cast<IoCall>(k));
    std::vector<std::array<std::uint64_t, io::kIoCallCount>> all(
        static_cast<std::size_t>(world_size()));
    int initialised = 0;
    MPI_Initialized(&initialised);
    if (initialised == 0) {
        all[0] = mine;
        return all;
    }
    MPI_Allgather(mine.data(), io::kIoCallCount, MPI_UINT64_T, all.data(), io::kIoCallCount,
                  MPI_UINT64_T, MPI_COMM_WORLD);
    return all;
}

bool any_rank(bool mine) {
    int initialised = 0;
    MPI_Initialized(&initialised);
    if (initialised == 0)
        return mine;
    int local = mine ? 1 : 0;
    int global = 0;
    MPI_Allreduce(&local, &global, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return global != 0;
}

// Relative path -> bytes of every regular file under `root`.
std::map<std::string, std::vector<std::byte>> tree_of(const std::string& root) {
    std::map<std::string, std::vector<std::byte>> tree;
    if (!fs::exists(root))
        return tree;
    for (const auto& entry : fs::recursive_directory_iterator(root)) {
        if (entry.is_regular_file())
            tree[fs::relative(entry.path(), root).string()] =
                testing::read_file_bytes(entry.path().string());
    }
    return tree;
}

bool is_record(const std::string& name) {
    return fs::path(name).filename() == driver::kManifestName;
}

bool is_index(const std::string& name) {
    return name.ends_with(".index.json") || name == "latest_universal";
}

struct SweepCase {
    std::string fixture;
    std::function<void(Options&)> options;
};

class FaultSweep {
  public:
    FaultSweep(std::string name, SweepCase sweep)
        : name_(std::move(name)),
          sweep_(std::move(sweep)),
          checkpoint_(testing::fixture_path(sweep_.fixture)) {}

    // The clean run, counted.
    void count_calls() {
        const std::string out = mpi_test::fresh_output_dir(name_ + "/clean");
        FaultPlan plan({out, checkpoint_});
        mpi_test::Outcome outcome;
        {
            ScopedCallHook hook(plan);
            outcome = mpi_test::run_conversion(checkpoint_, out, sweep_.options);
        }
        ASSERT_FALSE(outcome.error) << outcome.message;
        counts_ = gather_counts(plan);
        if (root())
            clean_ = tree_of(out);
        barrier();
    }

    std::uint64_t calls(int rank, IoCall call) const {
        return counts_.at(static_cast<std::size_t>(rank))[static_cast<std::size_t>(call)];
    }

    // One conversion with `trigger` on `rank`, then the checks of the file's header comment.
    void run_fault(int rank, const FaultTrigger& trigger) {
        const std::string out = mpi_test::fresh_output_dir(name_ + "/fault");
        const bool armed = mpi_test::rank() == rank;
        FaultPlan plan({out, checkpoint_}, armed ? std::optional(trigger) : std::nullopt);
        mpi_test::Outcome outcome;
        {
            ScopedCallHook hook(plan);
            outcome = mpi_test::run_conversion(checkpoint_, out, sweep_.options);
        }
        const bool fired = any_rank(plan.fired());
        ++runs_;
        const std::string what =
            name_ + ": " + io::io_call_name(trigger.call) + " #" + std::to_string(trigger.nth) +
            " on rank " + std::to_string(rank) +
            (trigger.shorten ? " short" : " errno " + std::to_string(trigger.error));
        if (!fired) {
            barrier();
            return;  // the calls of this run came out fewer (threads race): nothing was injected
        }
        const bool transient = trigger.shorten || trigger.error == EINTR;
        if (root()) {
            if (transient) {
                EXPECT_FALSE(outcome.error) << what << ": " << outcome.message;
            }
            if (outcome.error) {
                ++failures_;
                EXPECT_TRUE(*outcome.error == ErrorKind::kIo ||
                            *outcome.error == ErrorKind::kInput ||
                            *outcome.error == ErrorKind::kOutput)
                    << what << ": kind " << static_cast<int>(*outcome.error) << ": "
                    << outcome.message;
                EXPECT_NE(outcome.message.find("'/"), std::string::npos)
                    << what << ": the message names no file: " << outcome.message;
                // A failed transfer says where in its file.
                if (trigger.call == IoCall::kWrite && trigger.error == EIO) {
                    EXPECT_NE(outcome.message.find(" offset "), std::string::npos)
                        << what << ": the message names no offset: " << outcome.message;
                }
            } else {
                // Only outputs are written, synced and renamed: no such failure may pass.
                const bool must_fail = !transient && (trigger.call == IoCall::kWrite ||
                                                      trigger.call == IoCall::kSync ||
                                                      trigger.call == IoCall::kRename);
                EXPECT_FALSE(must_fail) << what << ": a failed output call went unnoticed";
            }
            check_published(out, outcome.error.has_value(), what);
        }
        barrier();
        if (!outcome.error)
            return;
        mpi_test::Outcome resumed = mpi_test::run_conversion(checkpoint_, out, [&](Options& o) {
            sweep_.options(o);
            o.resume = true;
        });
        if (root()) {
            EXPECT_FALSE(resumed.error) << what << ", then --resume: " << resumed.message;
            EXPECT_TRUE(tree_of(out) == clean_) << what << ", then --resume: not the clean tree";
        }
        barrier();
    }

    // Every call of every rank, `stride` apart (1: all of them), with each of `errors`.
    void sweep(const std::vector<IoCall>& kinds, const std::vector<int>& errors,
               std::uint64_t stride, bool shorten = false) {
        for (int rank = 0; rank < world_size(); ++rank) {
            for (IoCall call : kinds) {
                const std::uint64_t n = calls(rank, call);
                for (std::uint64_t i = 0; i < n; i += stride) {
                    for (int error : errors)
                        run_fault(rank, {call, i, error, false});
                    if (shorten)
                        run_fault(rank, {call, i, 0, true});
                    // The first case that goes wrong says enough (its messages are printed).
                    if (any_rank(::testing::Test::HasFailure()))
                        return;
                }
            }
        }
    }

    int runs() const { return runs_; }
    int failures() const { return failures_; }

  private:
    void check_published(const std::string& out, bool failed, const std::string& what) {
        const auto tree = tree_of(out);
        bool every_planned_file = true;
        for (const auto& [name, bytes] : clean_) {
            if (is_record(name) || is_index(name))
                continue;
            if (tree.count(name) == 0)
                every_planned_file = false;
        }
        for (const auto& [name, bytes] : tree) {
            if (name.ends_with(".tmp"))
                continue;  // a temp name, which the next run removes
            if (is_record(name)) {
                continue;
            }
            auto clean = clean_.find(name);
            if (clean == clean_.end()) {
                ADD_FAILURE() << what << ": '" << name << "' is not a file of the clean run";
                continue;
            }
            EXPECT_TRUE(bytes == clean->second)
                << what << ": '" << name << "' is published with other bytes than the clean run's";
            if (is_index(name)) {
                EXPECT_TRUE(every_planned_file)
                    << what << ": '" << name << "' is written though files are missing";
            }
        }
        if (!failed) {
            EXPECT_TRUE(tree == clean_) << what << ": a successful run left another tree";
        }
    }

    std::string name_;
    SweepCase sweep_;
    std::string checkpoint_;
    std::vector<std::array<std::uint64_t, io::kIoCallCount>> counts_;
    std::map<std::string, std::vector<std::byte>> clean_;
    int runs_ = 0;
    int failures_ = 0;
};

const std::vector<IoCall> kEveryCall = {
    IoCall::kOpen,     IoCall::kRead,          IoCall::kWrite,        IoCall::kSync,
    IoCall::kTruncate, IoCall::kRename,        IoCall::kUnlink,       IoCall::kMkdir,
    IoCall::kClose,    IoCall::kSyncDirectory, IoCall::kListDirectory};

void sharded(Options& o) {
    o.max_shard_size = 3000;
}

// `stride` 1: every call fails in turn; more: every stride-th (larger outputs, whose calls
// repeat per file).
void run_sweep(const std::string& name, SweepCase sweep, std::uint64_t stride = 1) {
    // A small I/O buffer: many blocks per file, and little memory to set up per conversion
    // (the sweep runs a thousand of them).
    const std::function<void(Options&)> options = sweep.options;
    sweep.options = [options](Options& o) {
        o.buffer_size = 256 << 10;
        options(o);
    };
    FaultSweep faults(name, std::move(sweep));
    faults.count_calls();
    ASSERT_FALSE(::testing::Test::HasFatalFailure());
    faults.sweep(kEveryCall, {EIO}, stride);
    faults.sweep({IoCall::kWrite, IoCall::kSync, IoCall::kTruncate}, {ENOSPC}, 3 * stride);
    faults.sweep({IoCall::kRead, IoCall::kWrite}, {}, 2 * stride, /*shorten=*/true);
    faults.sweep(kEveryCall, {EINTR}, 3 * stride);
    if (root())
        std::printf("[ sweep    ] %s: %d runs with a fault, %d of them failed cleanly\n",
                    name.c_str(), faults.runs(), faults.failures());
}

TEST(FaultSweep, ShardedSafetensorsDirect) {
    run_sweep("st-direct", {"z3_ws2_fp32", [](Options& o) { sharded(o); }});
}

TEST(FaultSweep, ShardedSafetensorsBuffered) {
    run_sweep("st-buffered", {"z3_ws2_fp32", [](Options& o) {
                                  sharded(o);
                                  o.io = IoBackend::kBuffered;
                              }});
}

TEST(FaultSweep, TorchBinDirect) {
    run_sweep("bin-direct", {"z2_ws2_fp32", [](Options& o) {
                                 sharded(o);
                                 o.format = OutputFormat::kTorch;
                             }});
}

TEST(FaultSweep, Hdf5Buffered) {
    if (!output::hdf5_output_built_in())
        GTEST_SKIP() << "built without HDF5";
    run_sweep("h5-buffered", {"z3_ws2_bf16", [](Options& o) {
                                  o.format = OutputFormat::kHdf5;
                                  o.io = IoBackend::kBuffered;
                              }});
}

// One file written by every rank (cut at 4 KiB blocks): its lead publishes it once all agree.
TEST(FaultSweep, SharedFileDirect) {
    run_sweep("shared-direct", {"z3_ws4_fp32", [](Options& o) {
                                    o.max_shard_size.reset();
                                    o.block_size = 4096;
                                }});
}

// A torch zip written by every rank: the lead also writes its CRC tail.
TEST(FaultSweep, SharedTorchBinBuffered) {
    run_sweep("shared-bin-buffered", {"z3_ws4_fp32", [](Options& o) {
                                          o.max_shard_size.reset();
                                          o.block_size = 4096;
                                          o.format = OutputFormat::kTorch;
                                          o.io = IoBackend::kBuffered;
                                      }});
}

TEST(FaultSweep, UniversalDirect) {
    run_sweep("universal-direct",
              {"z2_ws2_fp32", [](Options& o) { o.format = OutputFormat::kUniversal; }}, 2);
}

TEST(FaultSweep, UniversalBuffered) {
    const auto universal_buffered = [](Options& o) {
        o.format = OutputFormat::kUniversal;
        o.io = IoBackend::kBuffered;
    };
    run_sweep("universal-buffered", {"z3_ws2_fp32", universal_buffered}, 2);
}

}  // namespace
}  // namespace z2f
