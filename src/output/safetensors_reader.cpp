#include "output/safetensors_reader.hpp"

#include <algorithm>
#include <limits>
#include <optional>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "common/bytes.hpp"
#include "common/errors.hpp"
#include "output/json_escape.hpp"
#include "output/safetensors_layout.hpp"

namespace z2f::output {
namespace {

using json = nlohmann::json;

// Builds SafetensorsHeader from SAX events. Each handler returns false on the first violation
// (which stops nlohmann's parser) after storing a message in `error`.
class HeaderSax {
  public:
    explicit HeaderSax(SafetensorsHeader& out) : out_(out) {}

    std::string error;

    bool null() { return wrong_value("null"); }
    bool boolean(bool) { return wrong_value("a boolean"); }
    bool number_integer(json::number_integer_t) { return wrong_value("a negative number"); }
    bool number_float(json::number_float_t, const json::string_t&) {
        return wrong_value("a non-integer number");
    }
    bool binary(json::binary_t&) { return wrong_value("binary data"); }

    bool number_unsigned(json::number_unsigned_t value) {
        if (state_ == State::kShape) {
            tensor_.shape.push_back(value);
            return true;
        }
        if (state_ == State::kOffsets) {
            if (offsets_seen_ == 2) {
                return fail(tensor_context() + "data_offsets has more than two numbers");
            }
            (offsets_seen_ == 0 ? tensor_.begin : tensor_.end) = value;
            ++offsets_seen_;
            return true;
        }
        return wrong_value("a number");
    }

    bool string(json::string_t& value) {
        if (state_ == State::kMetadata) {
            out_.metadata.emplace_back(std::move(metadata_key_), std::move(value));
            return true;
        }
        if (state_ == State::kTensor && field_ == Field::kDtype) {
            const std::optional<DType> dtype = dtype_from_safetensors_name(value);
            if (!dtype) {
                return fail(tensor_context() + "unknown dtype \"" + printable_bytes(value) + "\"");
            }
            tensor_.dtype = *dtype;
            return true;
        }
        return wrong_value("a string");
    }

    bool start_object(std::size_t) {
        switch (state_) {
            case State::kStart:
                state_ = State::kTop;
                return true;
            case State::kTop:
                if (top_value_is_metadata_) {
                    state_ = State::kMetadata;
                } else {
                    state_ = State::kTensor;
                    fields_seen_ = 0;
                }
                return true;
            default:
                return wrong_value("an object");
        }
    }

    bool key(json::string_t& name) {
        switch (state_) {
            case State::kTop:
                if (name == "__metadata__") {
                    if (out_.has_metadata) {
                        return fail("\"__metadata__\" appears twice");
                    }
                    out_.has_metadata = true;
                    top_value_is_metadata_ = true;
                    return true;
                }
                if (!names_.insert(name).second) {
                    return fail("tensor \"" + printable_bytes(name) + "\" appears twice");
                }
                top_value_is_metadata_ = false;
                tensor_ = SafetensorsTensorInfo{};
                tensor_.name = std::move(name);
                return true;
            case State::kMetadata:
                if (!metadata_keys_.insert(name).second) {
                    return fail("metadata key \"" + printable_bytes(name) + "\" appears twice");
                }
                metadata_key_ = std::move(name);
                return true;
            case State::kTensor:
                return tensor_field(name);
            default:
                return fail("unexpected key \"" + printable_bytes(name) + "\"");
        }
    }

    bool end_object() {
        switch (state_) {
            case State::kTop:
                state_ = State::kDone;
                return true;
            case State::kMetadata:
                state_ = State::kTop;
                return true;
            case State::kTensor:
                if (fields_seen_ != kAllFields) {
                    return fail(tensor_context() +
                                "needs the fields \"dtype\", \"shape\" and \"data_offsets\"");
                }
                out_.tensors.push_back(std::move(tensor_));
                state_ = State::kTop;
                return true;
            default:
                return fail("unexpected end of object");
        }
    }

    bool start_array(std::size_t) {
        if (state_ == State::kTensor && field_ == Field::kShape) {
            state_ = State::kShape;
            return true;
        }
        if (state_ == State::kTensor && field_ == Field::kDataOffsets) {
            state_ = State::kOffsets;
            offsets_seen_ = 0;
            return true;
        }
        return wrong_value("an array");
    }

    bool end_array() {
        if (state_ == State::kShape) {
            state_ = State::kTensor;
            return true;
        }
        if (state_ == State::kOffsets) {
            if (offsets_seen_ != 2) {
                return fail(tensor_context() + "data_offsets needs exactly two numbers");
            }
            state_ = State::kTensor;
            return true;
        }
        return fail("unexpected end of array");
    }

    bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& ex) {
        return fail(std::string("not valid JSON: ") + ex.what());
    }

  private:
    enum class State { kStart, kTop, kMetadata, kTensor, kShape, kOffsets, kDone };
    enum class Field : unsigned { kDtype = 1, kShape = 2, kDataOffsets = 4 };
    static constexpr unsigned kAllFields = 7;

    bool fail(std::string message) {
        if (error.empty()) {
            error = std::move(message);
        }
        return false;
    }

    std::string tensor_context() const {
        return "tensor \"" + printable_bytes(tensor_.name) + "\": ";
    }

    // A value of the wrong JSON type for the current position.
    bool wrong_value(std::string_view kind) {
        switch (state_) {
            case State::kStart:
                return fail("the header is not a JSON object");
            case State::kTop:
                return fail(top_value_is_metadata_
                                ? "\"__metadata__\" must be an object of strings, not " +
                                      std::string(kind)
                                : tensor_context() + "must be an object, not " + std::string(kind));
            case State::kMetadata:
                return fail("metadata value of \"" + printable_bytes(metadata_key_) +
                            "\" must be a string, not " + std::string(kind));
            case State::kTensor:
                return fail(tensor_context() + "field \"" + std::string(field_name()) +
                            "\" has the wrong type (" + std::string(kind) + ")");
            case State::kShape:
                return fail(tensor_context() + "shape must hold unsigned integers, not " +
                            std::string(kind));
            case State::kOffsets:
                return fail(tensor_context() + "data_offsets must hold unsigned integers, not " +
                            std::string(kind));
            case State::kDone:
                break;
        }
        return fail("unexpected " + std::string(kind));
    }

    std::string_view field_name() const {
        switch (field_) {
            case Field::kDtype:
                return "dtype";
            case Field::kShape:
                return "shape";
            case Field::kDataOffsets:
                return "data_offsets";
        }
        return "?";
    }

    bool tensor_field(const std::string& name) {
        if (name == "dtype") {
            field_ = Field::kDtype;
        } else if (name == "shape") {
            field_ = Field::kShape;
        } else if (name == "data_offsets") {
            field_ = Field::kDataOffsets;
        } else {
            return fail(tensor_context() + "unknown field \"" + printable_bytes(name) + "\"");
        }
        const auto bit = static_cast<unsigned>(field_);
        if ((fields_seen_ & bit) != 0) {
            return fail(tensor_context() + "field \"" + name + "\" appears twice");
        }
        fields_seen_ |= bit;
        return true;
    }

    SafetensorsHeader& out_;
    State state_ = State::kStart;
    bool top_value_is_metadata_ = false;
    Field field_ = Field::kDtype;
    unsigned fields_seen_ = 0;
    unsigned offsets_seen_ = 0;
    SafetensorsTensorInfo tensor_;
    std::string metadata_key_;
    std::unordered_set<std::string> names_;
    std::unordered_set<std::string> metadata_keys_;
};

[[noreturn]] void reject(std::string_view file, const std::string& what) {
    throw_input_error(file, "invalid safetensors file: " + what);
}

// prod(shape) * item_size, or nothing on overflow.
std::optional<std::uint64_t> byte_size(const SafetensorsTensorInfo& tensor) {
    std::uint64_t count = 1;
    for (std::uint64_t dim : tensor.shape) {
        if (dim != 0 && count > std::numeric_limits<std::uint64_t>::max() / dim) {
            return std::nullopt;
        }
        count *= dim;
    }
    const std::uint64_t item = dtype_size(tensor.dtype);
    if (count > std::numeric_limits<std::uint64_t>::max() / item) {
        return std::nullopt;
    }
    return count * item;
}

}  // namespace

std::uint64_t safetensors_header_length(std::span<const std::byte> first_bytes,
                                        std::uint64_t file_size, std::string_view file) {
    if (file_size < 8 || first_bytes.size() < 8) {
        reject(file, "the file is " + std::to_string(file_size) +
                         " bytes long, shorter than the 8-byte header length");
    }
    const std::uint64_t length = load_le<std::uint64_t>(first_bytes.data());
    if (length > kSafetensorsMaxHeaderLength) {
        reject(file, "header length " + std::to_string(length) + " exceeds the limit of " +
                         std::to_string(kSafetensorsMaxHeaderLength) + " bytes");
    }
    if (length > file_size - 8) {
        reject(file, "header length " + std::to_string(length) + " runs past the end of the " +
                         std::to_string(file_size) + "-byte file");
    }
    return length;
}

SafetensorsHeader parse_safetensors_header(std::span<const std::byte> head, std::uint64_t file_size,
                                           std::string_view file) {
    const std::uint64_t length = safetensors_header_length(head, file_size, file);
    if (head.size() - 8 < length) {
        throw_internal_error("parse_safetensors_header: given " + std::to_string(head.size()) +
                             " bytes, the header needs " + std::to_string(8 + length));
    }
    const std::string_view text = as_string_view(head.subspan(8, static_cast<std::size_t>(length)));
    if (text.empty() || text.front() != '{') {
        reject(file, "the header does not start with '{'");
    }

    // nlohmann's lexer takes a NUL byte for the end of input, so "{}\0garbage" would pass;
    // JSON allows no raw NUL anywhere (serde_json rejects it), so refuse it up front.
    if (const std::size_t nul = text.find('\0'); nul != std::string_view::npos) {
        reject(file, "header: not valid JSON: a NUL byte at header offset " + std::to_string(nul));
    }

    SafetensorsHeader header;
    header.header_length = length;
    header.data_offset = 8 + length;
    HeaderSax sax(header);
    const bool parsed = json::sax_parse(text.begin(), text.end(), &sax);
    if (!parsed) {
        reject(file, "header: " + (sax.error.empty() ? std::string("not valid JSON") : sax.error));
    }

    std::stable_sort(header.tensors.begin(), header.tensors.end(),
                     [](const SafetensorsTensorInfo& a, const SafetensorsTensorInfo& b) {
                         return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
                     });
    std::uint64_t position = 0;
    for (const SafetensorsTensorInfo& tensor : header.tensors) {
        const std::string name = "tensor \"" + printable_bytes(tensor.name) + "\"";
        if (tensor.begin != position || tensor.end < tensor.begin) {
            reject(file, name + " has data_offsets [" + std::to_string(tensor.begin) + ", " +
                             std::to_string(tensor.end) + "], expected them to start at " +
                             std::to_string(position) +
                             " (tensors must tile the data buffer without holes or overlaps)");
        }
        const std::optional<std::uint64_t> bytes = byte_size(tensor);
        if (!bytes) {
            reject(file, name + ": shape times dtype size overflows 64 bits");
        }
        if (*bytes != tensor.end - tensor.begin) {
            reject(file, name + " needs " + std::to_string(*bytes) + " bytes for its shape and " +
                             std::string(safetensors_name(tensor.dtype)) +
                             ", its data_offsets span " +
                             std::to_string(tensor.end - tensor.begin));
        }
        position = tensor.end;
    }
    if (position != file_size - header.data_offset) {
        reject(file, "the tensors end at data offset " + std::to_string(position) +
                         ", but the data buffer holds " +
                         std::to_string(file_size - header.data_offset) +
                         " bytes (file size must be 8 + N + end of the last tensor)");
    }
    return header;
}

}  // namespace z2f::output
