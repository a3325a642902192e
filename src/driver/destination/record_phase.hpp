// The record phase, collective, before discovery: --verify and --resume continue what OUT_DIR's
// run record (destination/run_record.hpp) says was done, never what the command line's defaults
// would do.
//
// Rank 0 reads the record (destination/folders.hpp finds it, in OUT_DIR or, for a universal
// checkpoint, in its folder). Its output-shaping options and its tag become the run's options on
// every rank (broadcast): an option the caller chose that contradicts the record is a usage
// error that shows the record's value. --verify also takes the recorded tag when -t is not
// given and CKPT_DIR holds that tag folder (`latest` may have moved on since); --resume does
// not (a record of another tag is another run). Nothing is written.
//   --verify   without a record (zero_to_fp32.py's output, a copy without the hidden file) the
//              files are checked as the command line's options describe them, and rank 0 says
//              so with the options it uses;
//   --resume   without a record the run goes on with the command line's options; whether the
//              record (or its absence) lets this run continue in OUT_DIR is decided once the
//              plan is known (destination/inspection.hpp: a record of another run is refused).
#pragma once

#include <string>

#include "driver/phase_runner.hpp"
#include "zero2fp32/options.hpp"

namespace z2f::driver {

struct RecordedRun {  // rank 0 only
    bool found = false;
    std::string tag_dir;
    bool complete = false;
};

// Replaces the shaping options and the tag in `options` with the record's, on every rank.
// Only for options.verify or options.resume.
bool adopt_run_record(PhaseRunner& phases, const std::string& checkpoint_dir,
                      const std::string& output_dir, Options& options, RecordedRun& recorded);

}  // namespace z2f::driver
