#include "synth/synth_options.hpp"

#include "common/errors.hpp"
#include "synth/value_function.hpp"

namespace z2f::synth {

void validate(const SynthOptions& options) {
    if (options.stage != 2 && options.stage != 3) {
        throw_usage_error("--stage must be 2 or 3");
    }
    if (options.world < 1 || options.world > 1024) {
        throw_usage_error("--world-size must be in 1..1024");
    }
    if (options.tag.empty() || options.tag.find('/') != std::string::npos || options.tag == "." ||
        options.tag == "..") {
        throw_usage_error("--tag must be a plain folder name");
    }
    if (options.sub_group_size == 0) {
        throw_usage_error("--sub-group-size must be positive");
    }
    DType dtype = options.model.dtype;
    if (dtype != DType::kBF16 && dtype != DType::kF16 && dtype != DType::kF32) {
        throw_usage_error("--dtype must be bf16, fp16 or fp32");
    }
}

SynthContext SynthContext::make(const SynthOptions& options) {
    validate(options);
    SynthContext context;
    context.options = options;
    context.model = build_model(options.shape, options.model);
    if (options.stage == 2) {
        context.stage2 = stage2_layout(context.model, options.world);
    } else {
        context.stage3 = stage3_layout(context.model, options.world, options.sub_group_size);
    }
    return context;
}

std::uint64_t SynthContext::key(std::string_view name) const noexcept {
    return value_key(options.seed, name);
}

}  // namespace z2f::synth
