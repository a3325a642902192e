// DirectCopier: ranges of known bytes, tensor slots (with and without a dtype conversion, from
// extents spread over two inputs) and deferred bytes produced from the CRCs of the slots
// before them, written through O_DIRECT blocks, give exactly the bytes computed here in memory,
// whatever the read mode, the buffer and block sizes (down to one 4 KiB block) and the cut of a
// file into ranges; the input check's pieces get the raw bytes' CRCs.
#include "io/direct_copier.hpp"

#include <algorithm>
#include <cstring>
#include <random>

#include <gtest/gtest.h>

#include "common/crc32.hpp"
#include "io/dtype_convert.hpp"
#include "support/test_files.hpp"

namespace z2f::io {
namespace {

std::vector<std::byte> random_bytes(std::size_t size, std::uint64_t seed) {
    std::mt19937_64 random(seed);
    std::vector<std::byte> bytes(size);
    for (auto& byte : bytes)
        byte = static_cast<std::byte>(random() & 0xFF);
    return bytes;
}

std::vector<std::byte> concat(const std::vector<std::vector<std::byte>>& inputs,
                              const std::vector<SourceExtent>& extents) {
    std::vector<std::byte> bytes;
    for (const SourceExtent& extent : extents) {
        const auto& input = inputs[extent.file];
        bytes.insert(bytes.end(), input.begin() + static_cast<std::ptrdiff_t>(extent.offset),
                     input.begin() + static_cast<std::ptrdiff_t>(extent.offset + extent.length));
    }
    return bytes;
}

struct Case {
    const char* name;
    ReadMode mode;
    std::size_t buffer;
    std::size_t block;
};

class DirectCopierCases : public ::testing::TestWithParam<Case> {};

TEST_P(DirectCopierCases, PiecesOfAFileInOneOrSeveralRangesGiveItsBytes) {
    const Case& param = GetParam();
    testing::TempDir dir;
    // Two inputs; bf16 "weights" (finite values: the random bits' exponents are masked).
    std::vector<std::vector<std::byte>> inputs = {random_bytes(300'000, 1),
                                                  random_bytes(200'000, 2)};
    for (auto& input : inputs) {
        for (std::size_t i = 1; i < input.size(); i += 2)
            input[i] &= std::byte{0x3F};  // high byte of each bf16/fp32 word: no inf/NaN
    }
    std::vector<std::string> paths = {dir.file("in0"), dir.file("in1")};
    for (std::size_t i = 0; i < 2; ++i)
        testing::write_file_bytes(paths[i], inputs[i]);

    // The file: a 12-byte header, slot A (fp32 -> fp32, three extents over both inputs),
    // 4 known bytes, slot B (bf16 -> fp32), a 4-byte "descriptor" = CRC of A, slot C
    // (fp32 -> bf16), then a "directory" of 8 bytes = CRCs of B and C.
    const std::vector<SourceExtent> a_extents = {
        {0, 1000, 40'000}, {1, 4, 60'000}, {0, 100'000, 20}};
    const std::vector<SourceExtent> b_extents = {{1, 70'002, 50'000}, {0, 150'000, 30'002}};
    const std::vector<SourceExtent> c_extents = {{0, 200'000, 44'444}};
    const std::vector<std::byte> header = random_bytes(12, 3);
    const std::vector<std::byte> middle = random_bytes(4, 4);

    std::vector<std::byte> a = concat(inputs, a_extents);
    std::vector<std::byte> b_in = concat(inputs, b_extents);
    std::vector<std::byte> b(b_in.size() * 2);
    convert_elements(DType::kBF16, b_in, DType::kF32, b);
    std::vector<std::byte> c_in = concat(inputs, c_extents);
    std::vector<std::byte> c(c_in.size() / 2);
    convert_elements(DType::kF32, c_in, DType::kBF16, c);
    auto le32 = [](std::uint32_t value) {
        std::vector<std::byte> bytes(4);
        std::memcpy(bytes.data(), &value, 4);
        return bytes;
    };
    std::vector<std::byte> expected = header;
    auto append = [&](const std::vector<std::byte>& bytes) {
        expected.insert(expected.end(), bytes.begin(), bytes.end());
    };
    const std::uint64_t a_offset = expected.size();
    append(a);
    append(middle);
    const std::uint64_t b_offset = expected.size();
    append(b);
    const std::uint64_t descriptor = expected.size();
    append(le32(crc32_of(a)));
    const std::uint64_t c_offset = expected.size();
    append(c);
    const std::uint64_t directory = expected.size();
    std::vector<std::byte> tail = le32(crc32_of(b));
    std::vector<std::byte> crc_c = le32(crc32_of(c));
    tail.insert(tail.end(), crc_c.begin(), crc_c.end());
    append(tail);
    const std::uint64_t size = expected.size();

    struct Slot {
        std::uint64_t offset, length;
        std::vector<SourceExtent> extents;
        DType in, out;
    };
    const std::vector<Slot> slots = {{a_offset, a.size(), a_extents, DType::kF32, DType::kF32},
                                     {b_offset, b.size(), b_extents, DType::kBF16, DType::kF32},
                                     {c_offset, c.size(), c_extents, DType::kF32, DType::kBF16}};
    // Cut at block multiples as the plan does, never inside an element (the cuts fall inside
    // slots, converted ones too, and inside known bytes).
    std::vector<std::uint64_t> cuts = {0};
    for (std::uint64_t cut = 3 * param.block; cut < size; cut += 3 * param.block) {
        bool clean = true;
        for (const Slot& slot : slots) {
            if (slot.offset < cut && cut < slot.offset + slot.length)
                clean = (cut - slot.offset) % dtype_size(slot.out) == 0;
        }
        if (clean)
            cuts.push_back(cut);
    }
    cuts.push_back(size);
    if (param.block < (1 << 20)) {
        EXPECT_GT(cuts.size(), 5u);
    }

    // Every extent read, in order, for the direct reader.
    std::vector<ReadRange> reads;                               // all of them: the warm/cold sample
    std::vector<std::vector<ReadRange>> reads_of(cuts.size());  // per range
    // Each range's parts of the slots, computed as task_parts does (in element units).
    struct Part {
        std::size_t slot;
        std::uint64_t offset, length;
        std::vector<SourceExtent> extents;
    };
    std::vector<std::vector<Part>> parts(cuts.size() - 1);
    for (std::size_t r = 0; r + 1 < cuts.size(); ++r) {
        for (std::size_t s = 0; s < slots.size(); ++s) {
            const Slot& slot = slots[s];
            const std::uint64_t from = std::max(slot.offset, cuts[r]);
            const std::uint64_t to = std::min(slot.offset + slot.length, cuts[r + 1]);
            if (to <= from)
                continue;
            const std::uint64_t out_item = dtype_size(slot.out), in_item = dtype_size(slot.in);
            const std::uint64_t in_begin = (from - slot.offset) / out_item * in_item;
            const std::uint64_t in_end = (to - slot.offset) / out_item * in_item;
            std::vector<SourceExtent> extents;
            std::uint64_t position = 0;
            for (const SourceExtent& extent : slot.extents) {
                const std::uint64_t lo = std::max(in_begin, position);
                const std::uint64_t hi = std::min(in_end, position + extent.length);
                if (hi > lo)
                    extents.push_back({extent.file, extent.offset + (lo - position), hi - lo});
                position += extent.length;
            }
            for (const SourceExtent& extent : extents) {
                reads.push_back({extent.file, extent.offset, extent.length});
                reads_of[r].push_back(reads.back());
            }
            parts[r].push_back({s, from, to - from, std::move(extents)});
        }
    }

    InputFiles files({{paths[0], inputs[0].size()}, {paths[1], inputs[1].size()}}, 8);
    DirectCopyOptions options;
    options.buffer_size = param.buffer;
    options.block_size = param.block;
    options.read_mode = param.mode;
    DirectCopier copier(files, paths, reads, options);
    EXPECT_EQ(copier.direct_reads(), param.mode == ReadMode::kDirect);
    // The reads handed over as an executor does: a range ahead of the copies.
    copier.add_reads(reads_of[0]);
    const std::string out = dir.file("out");
    std::vector<std::uint64_t> durable;
    std::vector<std::uint32_t> crc_of_slot(slots.size(), 0);  // single range: checked below
    for (std::size_t r = 0; r + 1 < cuts.size(); ++r) {
        std::vector<SlotCopy> copies;
        for (const Part& part : parts[r]) {
            SlotCopy copy;
            copy.extents = part.extents;
            copy.source_dtype = slots[part.slot].in;
            copy.output_dtype = slots[part.slot].out;
            copy.offset = part.offset;
            copy.length = part.length;
            copy.want_crc = true;
            copy.name = "t";
            copies.push_back(copy);
        }
        RangeCopy range;
        range.path = out;
        range.begin = cuts[r];
        range.end = cuts[r + 1];
        if (range.end == size)
            range.final_size = size;
        range.tag = r;
        range.slots = copies;
        // Known bytes, parts and deferred bytes, clipped to the range, in file order.
        struct Region {
            std::uint64_t offset;
            const std::vector<std::byte>* bytes;
            std::int64_t tail;
        };
        const Region known[] = {{0, &header, -1}, {a_offset + a.size(), &middle, -1}};
        auto clip = [&](std::uint64_t offset, std::uint64_t length, RangePiece piece) {
            const std::uint64_t from = std::max(offset, range.begin);
            const std::uint64_t to = std::min(offset + length, range.end);
            if (to <= from)
                return;
            piece.offset = from;
            piece.length = to - from;
            if (piece.kind == RangePiece::Kind::kBytes)
                piece.bytes = piece.bytes.subspan(static_cast<std::size_t>(from - offset));
            range.pieces.push_back(piece);
        };
        for (const Region& region : known) {
            RangePiece piece;
            piece.bytes = *region.bytes;
            clip(region.offset, region.bytes->size(), piece);
        }
        for (std::size_t p = 0; p < parts[r].size(); ++p) {
            RangePiece piece;
            piece.kind = RangePiece::Kind::kSlot;
            piece.slot = p;
            clip(parts[r][p].offset, parts[r][p].length, piece);
        }
        RangePiece deferred;
        deferred.kind = RangePiece::Kind::kDeferred;
        deferred.tail = 0;
        clip(descriptor, 4, deferred);
        deferred.tail = 1;
        clip(directory, 8, deferred);
        std::sort(range.pieces.begin(), range.pieces.end(),
                  [](const RangePiece& x, const RangePiece& y) { return x.offset < y.offset; });
        const bool single = cuts.size() == 2;
        range.deferred = [&](const RangePiece& piece, std::span<const std::uint32_t> crcs) {
            if (!single)  // a shared file's tail: zeros, patched by its lead
                return std::vector<std::byte>(piece.length, std::byte{0});
            std::vector<std::byte> bytes = le32(crcs[0]);
            if (piece.tail == 1) {
                bytes = le32(crcs[1]);
                std::vector<std::byte> more = le32(crcs[2]);
                bytes.insert(bytes.end(), more.begin(), more.end());
            }
            return bytes;
        };
        copier.add_reads(reads_of[r + 1]);
        std::vector<std::uint32_t> crcs = copier.copy(range);
        if (single)
            crc_of_slot = crcs;
        for (std::uint64_t tag : copier.take_durable())
            durable.push_back(tag);
    }
    copier.drain();
    for (std::uint64_t tag : copier.take_durable())
        durable.push_back(tag);
    EXPECT_EQ(durable.size(), cuts.size() - 1);

    std::vector<std::byte> written = testing::read_file_bytes(out);
    ASSERT_EQ(written.size(), size);
    if (cuts.size() == 2) {
        EXPECT_TRUE(written == expected);
        EXPECT_EQ(crc_of_slot[0], crc32_of(a));
        EXPECT_EQ(crc_of_slot[1], crc32_of(b));
    } else {
        // The tail bytes are zeros until a lead patches them; everything else is exact.
        for (std::uint64_t at : {descriptor, directory})
            std::fill_n(expected.begin() + static_cast<std::ptrdiff_t>(at), at == directory ? 8 : 4,
                        std::byte{0});
        EXPECT_TRUE(written == expected);
    }
}

INSTANTIATE_TEST_SUITE_P(
    , DirectCopierCases,
    ::testing::Values(Case{"buffered_one_range", ReadMode::kBuffered, 16 << 20, 4 << 20},
                      Case{"direct_one_range", ReadMode::kDirect, 16 << 20, 4 << 20},
                      Case{"buffered_4k_blocks", ReadMode::kBuffered, 64 << 10, 4096},
                      Case{"direct_4k_blocks", ReadMode::kDirect, 64 << 10, 4096},
                      Case{"direct_tiny_buffer", ReadMode::kDirect, 4096, 8192},
                      Case{"direct_16k_blocks", ReadMode::kDirect, 256 << 10, 16384}),
    [](const auto& test) { return std::string(test.param.name); });

}  // namespace
}  // namespace z2f::io
