// make_wire_seeds FIXTURES_ROOT OUT_DIR: the seed corpus of the wire codec fuzz target
// (tests/fuzz/fuzz_wire_codec.cpp) from real payloads: every fixture's file list and per-file
// metadata, the parallel fixtures' file grids and metadata (the DeepSpeed 0.19.6 runs of
// deepspeed-newest by the reader routing gives them), discovery's routed payloads (with
// and without a --tp-rules text), and a few outcomes, each prefixed
// with the harness's selector byte. A development tool run by tests/fuzz/make_corpus.sh.
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "checkpoint/assemble.hpp"
#include "checkpoint/discovery.hpp"
#include "checkpoint/file_grid.hpp"
#include "checkpoint/meta_codec.hpp"
#include "checkpoint/parallel_assemble.hpp"
#include "checkpoint/routing.hpp"
#include "checkpoint/universal_assemble.hpp"
#include "checkpoint/universal_discovery.hpp"
#include "mpi/agreement.hpp"

namespace fs = std::filesystem;

namespace {

int written = 0;

// Every input's metadata, encoded one after the other as the metadata phase gathers them.
std::vector<std::byte> encoded_metas(const std::vector<z2f::checkpoint::InputFileSpec>& inputs) {
    z2f::WireWriter metas;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
        z2f::checkpoint::encode_file_meta(
            z2f::checkpoint::read_file_meta(inputs[i], static_cast<std::uint32_t>(i)), metas);
    }
    return metas.take();
}

void write_seed(const fs::path& out, std::uint8_t selector, std::span<const std::byte> payload) {
    std::ofstream file(out / ("seed-" + std::to_string(written++)), std::ios::binary);
    file.put(static_cast<char>(selector));
    file.write(reinterpret_cast<const char*>(payload.data()),
               static_cast<std::streamsize>(payload.size()));
}

}  // namespace

int main(int argc, char** argv) {
    using namespace z2f;
    if (argc != 3) {
        std::fprintf(stderr, "usage: make_wire_seeds FIXTURES_ROOT OUT_DIR\n");
        return 2;
    }
    fs::path root(argv[1]);
    fs::path out(argv[2]);
    fs::create_directories(out);
    try {
        // The DeepSpeed 0.19.6 runs take whichever reader routing gives them.
        auto data_parallel = [&](const fs::path& dir) {
            checkpoint::CheckpointFiles files = checkpoint::discover_checkpoint(dir, "");
            write_seed(out, 0, checkpoint::encode_files(files));
            write_seed(out, 1, encoded_metas(checkpoint::checkpoint_inputs(files)));
            write_seed(out, 5,
                       checkpoint::encode_discovered(checkpoint::discover_any_checkpoint(dir, "")));
        };
        auto parallel = [&](const fs::path& dir) {
            checkpoint::FileGrid grid = checkpoint::discover_file_grid(dir, "");
            write_seed(out, 3, checkpoint::encode_file_grid(grid));
            write_seed(out, 1, encoded_metas(checkpoint::parallel_inputs(grid)));
            checkpoint::DiscoveredCheckpoint found = checkpoint::discover_any_checkpoint(dir, "");
            found.tp_rules_text = R"({"default": "column", "rules": {"x\\.": "row"}})";
            write_seed(out, 5, checkpoint::encode_discovered(found));
        };
        for (const auto& entry : fs::directory_iterator(root / "deepspeed")) {
            if (fs::exists(entry.path() / "latest"))
                data_parallel(entry.path());
        }
        for (const auto& entry : fs::directory_iterator(root / "deepspeed-parallel")) {
            if (fs::exists(entry.path() / "latest"))
                parallel(entry.path());
        }
        // DeepSpeed's own universal checkpoints of the parallel runs: the routed universal
        // folder and its inputs' metadata.
        for (const auto& entry : fs::directory_iterator(root / "deepspeed-parallel")) {
            const fs::path dir = entry.path() / "ref" / "universal";
            if (!fs::exists(dir / "latest_universal"))
                continue;
            const checkpoint::UniversalFolder folder =
                checkpoint::discover_universal_checkpoint(dir, "");
            write_seed(out, 1, encoded_metas(checkpoint::universal_inputs(folder)));
            write_seed(out, 5,
                       checkpoint::encode_discovered(checkpoint::discover_any_checkpoint(dir, "")));
        }
        for (const auto& entry : fs::directory_iterator(root / "deepspeed-newest")) {
            if (!fs::exists(entry.path() / "latest"))
                continue;
            if (checkpoint::discover_any_checkpoint(entry.path(), "").is_parallel())
                parallel(entry.path());
            else
                data_parallel(entry.path());
        }
        write_seed(out, 4, mpi::encode_outcome({}));
        write_seed(out, 4,
                   mpi::encode_outcome(mpi::Outcome::failure(
                       ErrorKind::kInput, "zero_pp_rank_1_mp_rank_00_optim_states.pt: truncated")));
        write_seed(out, 4, mpi::encode_outcome(mpi::Outcome::stopped()));
    } catch (const Error& error) {
        std::fprintf(stderr, "make_wire_seeds: %s\n", error.what());
        return 1;
    }
    std::printf("%d seeds in %s\n", written, out.c_str());
    return 0;
}
