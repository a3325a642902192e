#include "driver/metadata_phase.hpp"

#include <type_traits>
#include <variant>

#include "checkpoint/assemble.hpp"
#include "checkpoint/discovery.hpp"
#include "checkpoint/meta_codec.hpp"
#include "checkpoint/parallel_assemble.hpp"
#include "checkpoint/universal_assemble.hpp"
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

// The metadata of every input, read by rank r for inputs r, r+P, ... (zip directory and pickle,
// never tensor bytes) and all-gathered through the metadata codec, on every rank in input
// order. One gather for every kind of checkpoint.
std::vector<checkpoint::FileMeta> gather_file_metas(
    const mpi::Communicator& comm, const std::vector<checkpoint::InputFileSpec>& inputs) {
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
    return metas;
}

}  // namespace

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

run::CheckpointMetadata read_checkpoint_metadata(const mpi::Communicator& comm,
                                                 const checkpoint::DiscoveredCheckpoint& found) {
    run::CheckpointMetadata metadata;
    metadata.tp_rules_text = found.tp_rules_text;
    std::visit(
        [&](const auto& files) {
            using Files = std::decay_t<decltype(files)>;
            if constexpr (std::is_same_v<Files, checkpoint::FileGrid>) {
                metadata.meta = checkpoint::assemble_parallel_meta(
                    files, gather_file_metas(comm, checkpoint::parallel_inputs(files)));
            } else if constexpr (std::is_same_v<Files, checkpoint::UniversalFolder>) {
                metadata.meta = checkpoint::assemble_universal_meta(
                    files, gather_file_metas(comm, checkpoint::universal_inputs(files)));
            } else {
                metadata.meta = checkpoint::assemble_checkpoint_meta(
                    files, gather_file_metas(comm, checkpoint::checkpoint_inputs(files)));
            }
        },
        found.files);
    return metadata;
}

}  // namespace z2f::driver
