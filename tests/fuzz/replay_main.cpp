// Replays files through a harness's LLVMFuzzerTestOneInput without libFuzzer, so that the
// ordinary test suite (any compiler, release or ASan build) runs every committed corpus and
// regression input through the same checks as the fuzzers.
//
//   fuzz_replay_<target> PATH...   PATH: a file, or a directory walked recursively
//
// Each input's name is printed before it runs, so that when a harness aborts, the last line of
// the output names the input responsible. Exits 1 when no input was found (a wrong path must
// not pass as "nothing failed").
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

std::vector<std::string> collect_inputs(int argc, char** argv) {
    namespace fs = std::filesystem;
    std::vector<std::string> inputs;
    for (int i = 1; i < argc; ++i) {
        fs::path path(argv[i]);
        if (fs::is_directory(path)) {
            for (const auto& entry : fs::recursive_directory_iterator(path)) {
                if (entry.is_regular_file()) {
                    inputs.push_back(entry.path().string());
                }
            }
        } else if (fs::is_regular_file(path)) {
            inputs.push_back(path.string());
        } else {
            std::fprintf(stderr, "replay: %s: no such file or directory\n", argv[i]);
            std::exit(1);
        }
    }
    std::sort(inputs.begin(), inputs.end());
    return inputs;
}

std::vector<std::uint8_t> read_input(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        std::fprintf(stderr, "replay: cannot read %s\n", path.c_str());
        std::exit(1);
    }
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

int main(int argc, char** argv) {
    std::vector<std::string> inputs = collect_inputs(argc, argv);
    if (inputs.empty()) {
        std::fprintf(stderr, "replay: no inputs found\n");
        return 1;
    }
    for (const std::string& path : inputs) {
        std::printf("replay: %s\n", path.c_str());
        std::fflush(stdout);
        std::vector<std::uint8_t> data = read_input(path);
        LLVMFuzzerTestOneInput(data.data(), data.size());
    }
    std::printf("replay: %zu inputs, no finding\n", inputs.size());
    return 0;
}
