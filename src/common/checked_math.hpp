// Overflow-checked arithmetic for sizes read from untrusted files.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

namespace z2f {

inline std::optional<std::uint64_t> checked_mul(std::uint64_t a, std::uint64_t b) noexcept {
    std::uint64_t out;
    if (__builtin_mul_overflow(a, b, &out)) {
        return std::nullopt;
    }
    return out;
}

inline std::optional<std::uint64_t> checked_add(std::uint64_t a, std::uint64_t b) noexcept {
    std::uint64_t out;
    if (__builtin_add_overflow(a, b, &out)) {
        return std::nullopt;
    }
    return out;
}

// Product of the dimensions (1 for a 0-dim shape), or nullopt when it overflows 64 bits.
inline std::optional<std::uint64_t> checked_numel(std::span<const std::uint64_t> shape) noexcept {
    std::uint64_t count = 1;
    for (std::uint64_t dim : shape) {
        auto next = checked_mul(count, dim);
        if (!next) {
            return std::nullopt;
        }
        count = *next;
    }
    return count;
}

inline std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) noexcept {
    return a / b + (a % b != 0 ? 1 : 0);
}

}  // namespace z2f
