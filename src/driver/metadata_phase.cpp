#include "driver/metadata_phase.hpp"

#include "checkpoint/assemble.hpp"
#include "checkpoint/discovery.hpp"
#include "checkpoint/meta_codec.hpp"
#include "checkpoint/parallel_assemble.hpp"
#include "checkpoint/parallel_meta_codec.hpp"
#include "driver/phase_runner.hpp"
#include "mpi/agreement.hpp"

namespace z2f::driver {
namespace {

// Every rank's failures of a nested step as one error, thrown on every rank alike.
void throw_agreed_failure(const mpi::Agreement& agreement) {
    std::string message;
    for (const std::string& text : agreement.distinct_messages())
        message += (message.empty() ? "" : "\n") + text;
    throw Error(agreement.kind, message);
}

}  // namespace

checkpoint::CheckpointFiles discover_files(const mpi::Communicator& comm,
                                           const std::string& checkpoint_dir,
                                           const std::string& tag,
                                           const checkpoint::DiscoveryOptions& options) {
    std::vector<std::byte> encoded;
    mpi::Outcome outcome = mpi::capture([&] {
        if (comm.is_root())
            encoded = checkpoint::encode_files(
                checkpoint::discover_checkpoint(checkpoint_dir, tag, options));
    });
    // Rank 0's outcome travels with the broadcast so that every rank fails alike.
    mpi::Agreement agreement = mpi::agree(comm, outcome);
    if (!agreement.ok)
        throw_agreed_failure(agreement);
    return checkpoint::decode_files(comm.broadcast(std::move(encoded)));
}

checkpoint::CheckpointMeta read_metadata(const mpi::Communicator& comm,
                                         const checkpoint::CheckpointFiles& files) {
    std::vector<checkpoint::InputFileSpec> inputs = checkpoint::checkpoint_inputs(files);
    const auto ranks = static_cast<std::size_t>(comm.size());
    WireWriter mine;
    mpi::Outcome outcome = mpi::capture([&] {
        for (auto i = static_cast<std::size_t>(comm.rank()); i < inputs.size(); i += ranks) {
            throw_if_interrupted();
            checkpoint::encode_file_meta(
                checkpoint::read_file_meta(inputs[i], static_cast<std::uint32_t>(i)), mine);
        }
    });
    mpi::Agreement agreement = mpi::agree(comm, outcome);
    if (!agreement.ok)
        throw_agreed_failure(agreement);
    std::vector<std::vector<std::byte>> all = comm.all_gather(mine.bytes());
    std::vector<checkpoint::FileMeta> metas(inputs.size());
    for (std::size_t rank = 0; rank < all.size(); ++rank) {
        WireReader in(all[rank], "file metadata");
        for (std::size_t i = rank; i < inputs.size(); i += ranks)
            metas[i] = checkpoint::decode_file_meta(in);
        in.expect_end();
    }
    return checkpoint::assemble_checkpoint_meta(files, std::move(metas));
}

checkpoint::DiscoveredCheckpoint discover(const mpi::Communicator& comm,
                                          const std::string& checkpoint_dir,
                                          const Options& options) {
    std::vector<std::byte> encoded;
    mpi::Outcome outcome = mpi::capture([&] {
        if (!comm.is_root())
            return;
        checkpoint::DiscoveredCheckpoint found = checkpoint::discover_any_checkpoint(
            checkpoint_dir, options.tag, checkpoint::DiscoveryOptions{options.from_universal});
        if (found.is_parallel() && !options.tp_rules.empty())
            found.tp_rules_text = checkpoint::read_tp_rules_file(options.tp_rules);
        encoded = checkpoint::encode_discovered(found);
    });
    mpi::Agreement agreement = mpi::agree(comm, outcome);
    if (!agreement.ok)
        throw_agreed_failure(agreement);
    return checkpoint::decode_discovered(comm.broadcast(std::move(encoded)));
}

checkpoint::ParallelCheckpointMeta read_parallel_metadata(const mpi::Communicator& comm,
                                                          const checkpoint::FileGrid& grid) {
    std::vector<checkpoint::ParallelInputSpec> inputs = checkpoint::parallel_inputs(grid);
    const auto ranks = static_cast<std::size_t>(comm.size());
    WireWriter mine;
    mpi::Outcome outcome = mpi::capture([&] {
        for (auto i = static_cast<std::size_t>(comm.rank()); i < inputs.size(); i += ranks) {
            throw_if_interrupted();
            checkpoint::encode_parallel_file_meta(
                checkpoint::read_parallel_file_meta(inputs[i], static_cast<std::uint32_t>(i)),
                mine);
        }
    });
    mpi::Agreement agreement = mpi::agree(comm, outcome);
    if (!agreement.ok)
        throw_agreed_failure(agreement);
    std::vector<std::vector<std::byte>> all = comm.all_gather(mine.bytes());
    std::vector<checkpoint::ParallelFileMeta> metas(inputs.size());
    for (std::size_t rank = 0; rank < all.size(); ++rank) {
        WireReader in(all[rank], "parallel file metadata");
        for (std::size_t i = rank; i < inputs.size(); i += ranks)
            metas[i] = checkpoint::decode_parallel_file_meta(in);
        in.expect_end();
    }
    return checkpoint::assemble_parallel_meta(grid, std::move(metas));
}

run::CheckpointMetadata read_checkpoint_metadata(const mpi::Communicator& comm,
                                                 const checkpoint::DiscoveredCheckpoint& found) {
    run::CheckpointMetadata metadata;
    metadata.tp_rules_text = found.tp_rules_text;
    if (const auto* grid = std::get_if<checkpoint::FileGrid>(&found.files))
        metadata.meta = read_parallel_metadata(comm, *grid);
    else
        metadata.meta = read_metadata(comm, std::get<checkpoint::CheckpointFiles>(found.files));
    return metadata;
}

}  // namespace z2f::driver
