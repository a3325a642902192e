// What a synthetic checkpoint should look like (the generator's options), and the derived
// facts every file of it is built from (model, partition layouts), computed once.
#pragma once

#include <cstdint>
#include <string>

#include "synth/model_spec.hpp"
#include "synth/partition_layout.hpp"

namespace z2f::synth {

// How optimizer_state_dict.zero_stage is pickled: by member name, as Python 3.11 does
// (getattr(ZeroStageEnum, 'weights')), or by value as other Pythons do (ZeroStageEnum(3)).
enum class ZeroStageEncoding : std::uint8_t { kByName, kByValue };

struct SynthOptions {
    LlamaShape shape;
    ModelOptions model;
    int stage = 3;            // 2 or 3
    std::uint32_t world = 1;  // data-parallel world size W
    std::string tag = "global_step2";
    std::uint64_t seed = 0;
    std::uint64_t sub_group_size = 1000000000;  // stage 3, DeepSpeed's default
    ZeroStageEncoding zero_stage_encoding = ZeroStageEncoding::kByName;
    // torch >= 2.1 files: extra zip records (.format_version, .storage_alignment, byteorder,
    // .data/serialization_id) and fp32_flat_groups pickled through _rebuild_from_type_v2 with
    // their ds_id attribute. Otherwise torch 1.13 files, like the bundled real fixtures.
    bool torch2 = false;
    bool moments = true;          // false: optimizer state without exp_avg / exp_avg_sq
    bool sparse_moments = false;  // moments as file holes
    // fp32 masters, stage-2 module weights and frozen parameters as file holes too (they then
    // read as zeros): pure-metadata benchmarks. Buffers and pickles stay real.
    bool sparse_masters = false;
};

// Throws a usage error for option combinations DeepSpeed could not have produced.
void validate(const SynthOptions& options);

struct SynthContext {
    SynthOptions options;
    ModelSpec model;
    Stage2Layout stage2;  // stage 2 only
    Stage3Layout stage3;  // stage 3 only

    static SynthContext make(const SynthOptions& options);

    std::uint32_t world() const noexcept { return options.world; }
    // The value key of a tensor name under this checkpoint's seed.
    std::uint64_t key(std::string_view name) const noexcept;
    DType model_dtype() const noexcept { return model.dtype; }
};

}  // namespace z2f::synth
