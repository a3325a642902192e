#include "support/expected_state.hpp"

#include <cstring>
#include <stdexcept>

#include "container/torch_file.hpp"
#include "io/posix_file.hpp"

namespace z2f::testing {

namespace {

std::vector<ExpectedTensor> read_dict(const std::string& path, bool nested) {
    container::TorchFile file = container::TorchFile::open(path);
    const auto* root = file.root().get<pickle::Dict>();
    const pickle::Value* state = root == nullptr ? nullptr
                                 : nested        ? root->find("state_dict")
                                                 : &file.root();
    const auto* dict = state == nullptr ? nullptr : state->get<pickle::Dict>();
    if (dict == nullptr) {
        throw std::runtime_error(path + ": no state_dict");
    }
    std::vector<ExpectedTensor> out;
    for (const auto& [key, value] : dict->items) {
        const auto* tensor = value.get<pickle::Tensor>();
        if (!key.string() || tensor == nullptr) {
            throw std::runtime_error(path + ": state_dict entry is not name -> tensor");
        }
        container::TensorBytes located = file.locate(*tensor, *key.string());
        ExpectedTensor expected;
        expected.name = std::string(*key.string());
        expected.dtype = located.dtype;
        expected.shape = located.shape;
        expected.bytes = read_range(path, located.offset, located.length);
        out.push_back(std::move(expected));
    }
    return out;
}

}  // namespace

std::vector<ExpectedTensor> read_expected_state_dict(const std::string& path) {
    return read_dict(path, true);
}

std::vector<ExpectedTensor> read_torch_state_dict(const std::string& path) {
    return read_dict(path, false);
}

const ExpectedTensor* find_tensor(const std::vector<ExpectedTensor>& tensors,
                                  const std::string& name) {
    for (const auto& tensor : tensors) {
        if (tensor.name == name) {
            return &tensor;
        }
    }
    return nullptr;
}

std::vector<std::byte> read_range(const std::string& path, std::uint64_t offset,
                                  std::uint64_t length) {
    io::File file = io::File::open_read(path);
    std::vector<std::byte> bytes(static_cast<std::size_t>(length));
    file.read_exact(offset, bytes);
    return bytes;
}

std::vector<std::byte> widen_to_f32(DType dtype, const std::vector<std::byte>& bytes) {
    if (dtype == DType::kF32) {
        return bytes;
    }
    if (dtype != DType::kBF16 && dtype != DType::kF16) {
        throw std::runtime_error("widen_to_f32: unsupported dtype");
    }
    std::vector<std::byte> out(bytes.size() * 2);
    for (std::size_t i = 0; i < bytes.size() / 2; ++i) {
        std::uint16_t half;
        std::memcpy(&half, &bytes[2 * i], 2);
        std::uint32_t bits;
        if (dtype == DType::kBF16) {
            bits = std::uint32_t{half} << 16;
        } else {
            // IEEE half -> single, exact (test-only reference, independent of production code).
            std::uint32_t sign = (half & 0x8000u) << 16;
            std::uint32_t exp = (half >> 10) & 0x1F;
            std::uint32_t mant = half & 0x3FFu;
            if (exp == 0x1F) {
                bits = sign | 0x7F800000u | (mant << 13);
            } else if (exp != 0) {
                bits = sign | ((exp + 112) << 23) | (mant << 13);
            } else if (mant == 0) {
                bits = sign;
            } else {
                int shift = 0;
                while ((mant & 0x400u) == 0) {
                    mant <<= 1;
                    ++shift;
                }
                mant &= 0x3FFu;
                bits = sign | (static_cast<std::uint32_t>(113 - shift) << 23) | (mant << 13);
            }
        }
        std::memcpy(&out[4 * i], &bits, 4);
    }
    return out;
}

}  // namespace z2f::testing
