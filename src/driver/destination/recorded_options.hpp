// The output-shaping options (ShapeOption, zero2fp32/options.hpp) as --verify and --resume use
// them: the values a run record holds become the run's options, except that an option the
// caller chose must agree with the record (a contradiction is a usage error); and their wire
// form, for rank 0 to hand them to every rank.
#pragma once

#include <string>

#include "common/wire_codec.hpp"
#include "zero2fp32/options.hpp"

namespace z2f::driver {

// The value of one shaping option as the command line spells it ("bf16", "5000000000",
// "none", "on", "a, b").
std::string shape_value(const Options& options, ShapeOption option);

// Every shaping field of `options` taken from `recorded`. Throws a usage error naming every
// option in options.chosen whose value differs from the record (`where` names OUT_DIR), worded
// for --resume or --verify as options.resume says.
void adopt_recorded_shape(const Options& recorded, Options& options, const std::string& where);

// The shaping fields and the tag.
void encode_shape(WireWriter& out, const Options& options);
void decode_shape(WireReader& in, Options& options);

}  // namespace z2f::driver
