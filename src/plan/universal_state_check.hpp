// Whether a checkpoint's optimizer state fits a universal checkpoint at all
// (docs/universal-checkpoint.md §2): one holds, per parameter, the fp32 master and Adam's two
// moments, exp_avg and exp_avg_sq. ds_to_universal.py extracts exactly those two from every flat
// group, and DeepSpeed's loaders read them back by name, so a group whose optimizer kept other
// state (Muon's momentum_buffer, SGD's momentum, Adafactor's factored moments) has nothing a
// universal checkpoint can carry. Such a run is refused for --format universal with the keys its
// files do hold; its weights still convert to the Hugging Face formats, which need no moments.
#pragma once

#include "checkpoint/checkpoint_meta.hpp"

namespace z2f::plan {

// Throws an unsupported-layout error naming the first optimizer file, flat group and state keys
// when some group of some rank lacks exp_avg or exp_avg_sq but holds other optimizer state. A
// group without any state (saved without optimizer states) is left to the moment checks of the
// consolidation, which say that.
void check_universal_optimizer_state(const checkpoint::CheckpointMeta& meta);

}  // namespace z2f::plan
