#include "driver/destination/record_phase.hpp"

#include <optional>

#include "common/errors.hpp"
#include "common/wire_codec.hpp"
#include "driver/destination/folders.hpp"
#include "driver/destination/recorded_options.hpp"
#include "driver/destination/run_record.hpp"
#include "io/posix_file.hpp"

namespace z2f::driver {
namespace {

// --verify of a folder without a run record (DeepSpeed's own zero_to_fp32.py output, or a copy
// made without the hidden file): checked as the command line describes it, which is said first,
// since the defaults may not be how the folder was written.
std::string verify_without_record_note(const std::string& output_dir, const Options& options) {
    std::string shape;
    for (ShapeOption option :
         {ShapeOption::kFormat, ShapeOption::kDtype, ShapeOption::kMaxShardSize}) {
        shape += (shape.empty() ? "" : ", ") + std::string(enum_name(option)) + " " +
                 shape_value(options, option);
    }
    for (ShapeOption option : options.chosen) {
        if (option != ShapeOption::kFormat && option != ShapeOption::kDtype &&
            option != ShapeOption::kMaxShardSize)
            shape += ", " + std::string(enum_name(option)) + " " + shape_value(options, option);
    }
    return "'" + output_dir + "' holds no run record (" + kManifestName +
           "): verifying it as the command line describes it (" + shape +
           "); give the options it was written with (--parity for zero_to_fp32.py's output, "
           "--format torch for pytorch_model*.bin)";
}

}  // namespace

bool adopt_run_record(PhaseRunner& phases, const std::string& checkpoint_dir,
                      const std::string& output_dir, Options& options, RecordedRun& recorded) {
    std::vector<std::byte> encoded;
    bool ok = phases.run("record", [&] {
        if (!phases.is_root())
            return;
        if (!io::is_directory(output_dir)) {
            if (options.resume)
                return;  // nothing to continue: a run like any other
            throw_output_error(
                "'" + output_dir + "' " +
                (io::path_exists(output_dir) ? "is not a directory" : "does not exist") +
                ": nothing to verify");
        }
        const std::string path = recorded_manifest_path(output_dir);
        std::optional<RunManifest> manifest;
        if (io::is_regular_file(path))
            manifest = decode_manifest(io::read_small_file(path, 64u << 20));
        if (!manifest) {
            // --resume: the output-folder checks decide what its files are
            // (destination/inspection.hpp).
            if (options.verify)
                phases.say(MessageLevel::kWarning, verify_without_record_note(output_dir, options));
            return;
        }
        Options effective = options;
        adopt_recorded_shape(manifest->shape, effective, output_dir);
        if (options.verify && !options.tag.empty() && options.tag != manifest->tag) {
            throw_usage_error("--verify checks OUT_DIR as its run record says it was written: -t " +
                              options.tag + ", but '" + output_dir + "' was converted from tag " +
                              manifest->tag);
        }
        // --verify without -t: `latest` may have moved on since the conversion, so check the
        // recorded tag when CKPT_DIR holds it (CKPT_DIR may also be the tag folder itself).
        // Not --resume: a record of another tag than the one asked for is another run, refused
        // by name (destination/inspection.hpp), never silently taken for this one.
        if (options.verify && options.tag.empty() && !manifest->tag.empty() &&
            io::is_directory(checkpoint_dir + "/" + manifest->tag))
            effective.tag = manifest->tag;
        recorded.found = true;
        recorded.tag_dir = manifest->tag_dir;
        recorded.complete = manifest->complete;
        WireWriter out;
        encode_shape(out, effective);
        encoded = out.take();
    });
    if (!ok)
        return false;
    std::vector<std::byte> bytes = phases.comm().broadcast(std::move(encoded));
    if (bytes.empty())
        return true;  // --resume without a record: the command line's options stand
    return phases.run("record", [&] {
        WireReader in(bytes, "run record");
        decode_shape(in, options);
        in.expect_end();
    });
}

}  // namespace z2f::driver
