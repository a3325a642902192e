#include "common/wire_codec.hpp"

#include <gtest/gtest.h>

#include "common/errors.hpp"

namespace z2f {
namespace {

enum class Colour : std::uint8_t { kRed, kGreen, kBlue };

std::vector<std::byte> sample() {
    WireWriter out;
    out.u8(7);
    out.u32(0xDEADBEEF);
    out.u64(1ull << 40);
    out.i64(-5);
    out.boolean(true);
    out.enumerator(Colour::kBlue);
    out.str("héllo");
    out.dims({2, 3, 4});
    out.strings({"a", "", "ccc"});
    out.optional(std::optional<std::uint64_t>(9), [](WireWriter& w, std::uint64_t v) { w.u64(v); });
    out.optional(std::optional<std::uint64_t>(), [](WireWriter& w, std::uint64_t v) { w.u64(v); });
    return out.take();
}

void read_sample(WireReader& in) {
    EXPECT_EQ(in.u8(), 7);
    EXPECT_EQ(in.u32(), 0xDEADBEEF);
    EXPECT_EQ(in.u64(), 1ull << 40);
    EXPECT_EQ(in.i64(), -5);
    EXPECT_TRUE(in.boolean());
    EXPECT_EQ(in.enumerator(Colour::kBlue), Colour::kBlue);
    EXPECT_EQ(in.str(), "héllo");
    EXPECT_EQ(in.dims(), (std::vector<std::uint64_t>{2, 3, 4}));
    EXPECT_EQ(in.strings(), (std::vector<std::string>{"a", "", "ccc"}));
    EXPECT_EQ(in.optional([](WireReader& r) { return r.u64(); }), std::optional<std::uint64_t>(9));
    EXPECT_EQ(in.optional([](WireReader& r) { return r.u64(); }), std::nullopt);
    in.expect_end();
}

TEST(WireCodec, RoundTripsEveryFieldKind) {
    std::vector<std::byte> bytes = sample();
    WireReader in(bytes, "sample");
    read_sample(in);
}

TEST(WireCodec, LittleEndianOnTheWire) {
    WireWriter out;
    out.u32(0x01020304);
    ASSERT_EQ(out.bytes().size(), 4u);
    EXPECT_EQ(out.bytes()[0], std::byte{4});
    EXPECT_EQ(out.bytes()[3], std::byte{1});
}

TEST(WireCodec, EveryTruncationThrowsAnInternalErrorNamingThePayload) {
    std::vector<std::byte> bytes = sample();
    for (std::size_t cut = 0; cut < bytes.size(); ++cut) {
        WireReader in(std::span<const std::byte>(bytes).first(cut), "sample");
        try {
            read_sample(in);
            ADD_FAILURE() << "read a payload cut at " << cut;
        } catch (const Error& error) {
            EXPECT_EQ(error.kind(), ErrorKind::kInternal);
            EXPECT_NE(std::string(error.what()).find("malformed sample payload"), std::string::npos)
                << error.what();
        }
    }
}

TEST(WireCodec, TrailingBytesAreMalformed) {
    std::vector<std::byte> bytes = sample();
    bytes.push_back(std::byte{0});
    WireReader in(bytes, "sample");
    EXPECT_THROW(read_sample(in), Error);
}

TEST(WireCodec, BooleansAreZeroOrOne) {
    std::vector<std::byte> bytes{std::byte{2}};
    WireReader in(bytes, "flag");
    EXPECT_THROW(in.boolean(), Error);
}

TEST(WireCodec, EnumeratorsAreRangeChecked) {
    std::vector<std::byte> bytes{std::byte{3}};
    WireReader in(bytes, "colour");
    EXPECT_THROW(in.enumerator(Colour::kBlue), Error);
}

TEST(WireCodec, CountsCannotExceedTheBytesLeft) {
    // A count of 2^62 elements with nothing behind it: refused before any allocation.
    WireWriter out;
    out.u64(1ull << 62);
    WireReader in(out.bytes(), "huge");
    EXPECT_THROW(in.sequence(1, [](WireReader& r) { return r.u8(); }), Error);
    WireReader strings(out.bytes(), "huge");
    EXPECT_THROW(strings.str(), Error);
}

}  // namespace
}  // namespace z2f
