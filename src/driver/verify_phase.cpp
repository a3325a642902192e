#include "driver/verify_phase.hpp"

#include "common/errors.hpp"
#include "driver/executor.hpp"
#include "io/input_files.hpp"
#include "io/posix_file.hpp"

namespace z2f::driver {

bool verify_outputs(PhaseRunner& phases, const run::RunPlan& plan, const std::string& output_dir,
                    const Options& options) {
    io::InputFiles inputs(plan.tensors.inputs, io::InputFiles::default_capacity());
    io::CopyOptions copy;
    copy.backend = options.io;
    copy.buffer_size = static_cast<std::size_t>(options.buffer_size);
    bool ok = phases.run("verify", [&] {
        std::vector<std::string> mismatches =
            verify_tasks(plan, RankTarget{output_dir, phases.rank()}, inputs, copy);
        if (phases.is_root() && plan.index_name) {
            std::string path = output_dir + "/" + *plan.index_name;
            if (io::read_small_file(path, 1u << 30) != plan.index_json) {
                mismatches.push_back(*plan.index_name + ": differs from the index of this plan");
            }
        }
        if (!mismatches.empty()) {
            std::string message =
                "verification failed: " + std::to_string(mismatches.size()) + " mismatch(es)";
            for (const std::string& line : mismatches)
                message += "\n  " + line;
            throw Error(ErrorKind::kInput, message);
        }
    });
    if (ok)
        phases.say(MessageLevel::kInfo, "verify: every output byte matches the checkpoint");
    return ok;
}

bool outputs_present(const run::RunPlan& plan, const std::string& output_dir) {
    for (const run::OutputFileRecord& file : plan.files) {
        std::string path = output_dir + "/" + file.name();
        if (!io::is_regular_file(path) || io::file_size(path) != file.layout.size)
            return false;
    }
    return !plan.index_name || io::is_regular_file(output_dir + "/" + *plan.index_name);
}

}  // namespace z2f::driver
