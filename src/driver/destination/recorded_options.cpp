#include "driver/destination/recorded_options.hpp"

#include <algorithm>

#include "common/errors.hpp"

namespace z2f::driver {
namespace {

std::string joined(const std::vector<std::string>& items) {
    std::string text;
    for (const std::string& item : items)
        text += (text.empty() ? "'" : ", '") + item + "'";
    return text.empty() ? "none" : text;
}

const char* on_off(bool value) {
    return value ? "on" : "off";
}

template <typename Enum>
Enum read_enum(WireReader& in) {
    std::optional<Enum> value = enum_from_name<Enum>(in.str());
    if (!value)
        in.malformed("unknown option value");
    return *value;
}

}  // namespace

std::string shape_value(const Options& o, ShapeOption option) {
    switch (option) {
        case ShapeOption::kFormat:
            return std::string(enum_name(o.format));
        case ShapeOption::kDtype:
            return std::string(enum_name(o.dtype));
        case ShapeOption::kMaxShardSize:
            return o.max_shard_size ? std::to_string(*o.max_shard_size) + " bytes" : "none";
        case ShapeOption::kCastAllBuffers:
            return on_off(o.cast_all_buffers);
        case ShapeOption::kKeepFrozenDtype:
            return on_off(o.keep_frozen_dtype);
        case ShapeOption::kStage1Frozen:
            return std::string(enum_name(o.stage1_frozen));
        case ShapeOption::kExcludeFrozen:
            return on_off(o.exclude_frozen);
        case ShapeOption::kUntie:
            return on_off(o.untie);
        case ShapeOption::kInclude:
            return joined(o.include);
        case ShapeOption::kExclude:
            return joined(o.exclude);
        case ShapeOption::kStripPrefix:
            return joined(o.strip_prefixes);
        case ShapeOption::kHdf5Bf16:
            return std::string(enum_name(o.hdf5_bf16));
        case ShapeOption::kTpRules:
            return o.tp_rules.empty() ? "none" : "'" + o.tp_rules + "'";
        case ShapeOption::kTpReplicated:
            return std::string(enum_name(o.tp_replicated));
        case ShapeOption::kStripVocabPadding:
            return on_off(o.strip_vocab_padding);
    }
    return "?";
}

void adopt_recorded_shape(const Options& recorded, Options& options, const std::string& where) {
    const bool resume = options.resume;
    std::string contradictions;
    for (ShapeOption option : options.chosen) {
        if (shape_value(options, option) != shape_value(recorded, option)) {
            contradictions += std::string(contradictions.empty() ? "" : "; ") +
                              std::string(enum_name(option)) + " " + shape_value(options, option) +
                              ", but '" + where + "' was written with " +
                              shape_value(recorded, option);
        }
    }
    if (!contradictions.empty()) {
        throw_usage_error(
            resume ? "--resume continues the run that OUT_DIR's run record describes: " +
                         contradictions +
                         " (leave the option out, or start over with --overwrite instead)"
                   : "--verify checks OUT_DIR as its run record says it was written: " +
                         contradictions + " (leave the option out, or verify another folder)");
    }
    options.format = recorded.format;
    options.dtype = recorded.dtype;
    options.max_shard_size = recorded.max_shard_size;
    options.cast_all_buffers = recorded.cast_all_buffers;
    options.keep_frozen_dtype = recorded.keep_frozen_dtype;
    options.stage1_frozen = recorded.stage1_frozen;
    options.exclude_frozen = recorded.exclude_frozen;
    options.untie = recorded.untie;
    options.include = recorded.include;
    options.exclude = recorded.exclude;
    options.strip_prefixes = recorded.strip_prefixes;
    options.hdf5_bf16 = recorded.hdf5_bf16;
    options.tp_rules = recorded.tp_rules;
    options.tp_replicated = recorded.tp_replicated;
    options.strip_vocab_padding = recorded.strip_vocab_padding;
}

void encode_shape(WireWriter& out, const Options& o) {
    out.str(o.tag);
    out.str(enum_name(o.format));
    out.str(enum_name(o.dtype));
    out.optional(o.max_shard_size, [](WireWriter& w, std::uint64_t bytes) { w.u64(bytes); });
    out.boolean(o.cast_all_buffers);
    out.boolean(o.keep_frozen_dtype);
    out.str(enum_name(o.stage1_frozen));
    out.boolean(o.exclude_frozen);
    out.boolean(o.untie);
    out.strings(o.include);
    out.strings(o.exclude);
    out.strings(o.strip_prefixes);
    out.str(enum_name(o.hdf5_bf16));
    out.str(o.tp_rules);
    out.str(enum_name(o.tp_replicated));
    out.boolean(o.strip_vocab_padding);
}

void decode_shape(WireReader& in, Options& o) {
    o.tag = in.str();
    o.format = read_enum<OutputFormat>(in);
    o.dtype = read_enum<DType>(in);
    o.max_shard_size = in.optional([](WireReader& r) { return r.u64(); });
    o.cast_all_buffers = in.boolean();
    o.keep_frozen_dtype = in.boolean();
    o.stage1_frozen = read_enum<Stage1Frozen>(in);
    o.exclude_frozen = in.boolean();
    o.untie = in.boolean();
    o.include = in.strings();
    o.exclude = in.strings();
    o.strip_prefixes = in.strings();
    o.hdf5_bf16 = read_enum<Hdf5Bf16>(in);
    o.tp_rules = in.str();
    o.tp_replicated = read_enum<TpReplicated>(in);
    o.strip_vocab_padding = in.boolean();
}

}  // namespace z2f::driver
