// consumer CKPT_DIR OUT_DIR: plans a conversion without MPI, converts it with MPI, and checks that
// the files written are the planned ones. Prints one line per planned file, then "ok".
#include <cstdio>
#include <filesystem>

#include <zero2fp32/mpi.hpp>
#include <zero2fp32/plan.hpp>

int main(int argc, char** argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: consumer CKPT_DIR OUT_DIR\n");
        return 2;
    }
    z2f::Options options;
    options.dtype = z2f::DType::kBF16;
    try {
        z2f::ConversionPlan plan = z2f::plan_conversion(argv[1], options);
        for (const auto& file : plan.files)
            std::printf("planned %s %llu\n", file.name.c_str(),
                        static_cast<unsigned long long>(file.size));
        std::printf("tensors %zu, first %s (%s) in %s\n", plan.tensors.size(),
                    plan.tensors.front().name.c_str(),
                    std::string(z2f::dtype_name(plan.tensors.front().dtype)).c_str(),
                    plan.tensors.front().file.c_str());

        MPI_Init(&argc, &argv);
        z2f::ConversionResult result = z2f::convert(argv[1], argv[2], options, MPI_COMM_WORLD);
        MPI_Finalize();
        if (result.files.size() != plan.files.size())
            return 1;
        for (const auto& file : plan.files) {
            if (std::filesystem::file_size(std::filesystem::path(argv[2]) / file.name) !=
                file.size) {
                std::fprintf(stderr, "%s: not the planned size\n", file.name.c_str());
                return 1;
            }
        }
    } catch (const z2f::Error& error) {
        std::fprintf(stderr, "consumer: %s\n", error.what());
        return 1;
    }
    std::printf("ok\n");
    return 0;
}
