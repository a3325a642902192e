// Expected byte counts are what huggingface_hub's parse_size_to_int returns for the same
// strings (checked with Python 3.11: int(float(number) * 10**k)).
#include "output/shard_size.hpp"

#include <gtest/gtest.h>

#include "common/byte_size.hpp"
#include "common/errors.hpp"

namespace z2f {
namespace {

TEST(ShardSize, DecimalUnitsLikeHuggingfaceHub) {
    EXPECT_EQ(output::parse_max_shard_size("5GB"), 5'000'000'000u);
    EXPECT_EQ(output::parse_max_shard_size("10KB"), 10'000u);
    EXPECT_EQ(output::parse_max_shard_size("5KB"), 5'000u);
    EXPECT_EQ(output::parse_max_shard_size("3MB"), 3'000'000u);
    EXPECT_EQ(output::parse_max_shard_size("2TB"), 2'000'000'000'000u);
    EXPECT_EQ(output::parse_max_shard_size("5gb"), 5'000'000'000u);
    EXPECT_EQ(output::parse_max_shard_size("5Gb"), 5'000'000'000u);
    EXPECT_EQ(output::parse_max_shard_size(" 5gb "), 5'000'000'000u);
    EXPECT_EQ(output::parse_max_shard_size("5 GB"), 5'000'000'000u);
    EXPECT_EQ(output::parse_max_shard_size("50GB"), 50'000'000'000u);
}

TEST(ShardSize, FloatNumbersTruncateLikePythonInt) {
    EXPECT_EQ(output::parse_max_shard_size("1.5GB"), 1'500'000'000u);
    EXPECT_EQ(output::parse_max_shard_size("1.1KB"), 1100u);
    EXPECT_EQ(output::parse_max_shard_size("0.1KB"), 100u);
    EXPECT_EQ(output::parse_max_shard_size("1.005KB"), 1004u);  // 1004.9999999999999 truncated
    EXPECT_EQ(output::parse_max_shard_size("4.35GB"), 4'350'000'000u);
    EXPECT_EQ(output::parse_max_shard_size("2.675TB"), 2'675'000'000'000u);
    EXPECT_EQ(output::parse_max_shard_size("1e3KB"), 1'000'000u);
    EXPECT_EQ(output::parse_max_shard_size("1_000KB"), 1'000'000u);
    EXPECT_EQ(output::parse_max_shard_size(".5MB"), 500'000u);
    EXPECT_EQ(output::parse_max_shard_size("5.KB"), 5'000u);
    EXPECT_EQ(output::parse_max_shard_size("+2GB"), 2'000'000'000u);
    EXPECT_EQ(output::parse_max_shard_size("1.5e-3GB"), 1'500'000u);
}

TEST(ShardSize, BinaryUnitsArePowersOf1024) {
    EXPECT_EQ(output::parse_max_shard_size("5GiB"), 5ull << 30);
    EXPECT_EQ(output::parse_max_shard_size("5gib"), 5ull << 30);
    EXPECT_EQ(output::parse_max_shard_size("512KiB"), 512ull << 10);
    EXPECT_EQ(output::parse_max_shard_size("1.5MiB"), 3ull << 19);
    EXPECT_EQ(output::parse_max_shard_size("2 TiB"), 2ull << 40);
    EXPECT_EQ(output::parse_max_shard_size("10kB"), 10'000u);
    EXPECT_EQ(output::parse_max_shard_size("100B"), 100u);
}

TEST(ShardSize, ZeroIsRefused) {
    for (const char* text : {"0", "0GB", "-0KB", "9.3e-10KB", "0.5B"}) {
        try {
            output::parse_max_shard_size(text);
            ADD_FAILURE() << "accepted '" << text << "'";
        } catch (const Error& e) {
            EXPECT_EQ(e.kind(), ErrorKind::kUsage) << text;
            EXPECT_NE(std::string(e.what()).find("'" + std::string(text) + "'"), std::string::npos)
                << e.what();
        }
    }
}

TEST(ShardSize, PlainIntegerIsBytesAndNoneMeansNoSharding) {
    EXPECT_EQ(output::parse_max_shard_size("5000"), 5000u);
    EXPECT_EQ(output::parse_max_shard_size("18446744073709551615"), 18446744073709551615u);
    EXPECT_EQ(output::parse_max_shard_size("none"), std::nullopt);
    EXPECT_EQ(output::parse_max_shard_size("None"), std::nullopt);
    EXPECT_EQ(output::parse_max_shard_size(" NONE "), std::nullopt);
}

TEST(ShardSize, RejectionsAreUsageErrors) {
    const char* bad[] = {
        "",           " ",
        "5GiX",       "5MIBB",
        "5G",         "5Bytes",
        "GB",         "abcGB",
        "1..5GB",     "1e GB",
        "1e+GB",      "_1GB",
        "1_GB",       "1__0GB",
        "1._5GB",     "0x10GB",
        "infGB",      "nanGB",
        "-5GB",       "1e400GB",
        "20000000TB", "18446744073709551616",
        "5 G B",      "5GB5",
        "nonee",
    };
    for (const char* text : bad) {
        try {
            output::parse_max_shard_size(text, "--max_shard_size");
            ADD_FAILURE() << "accepted '" << text << "'";
        } catch (const Error& e) {
            EXPECT_EQ(e.kind(), ErrorKind::kUsage) << text;
            EXPECT_NE(std::string(e.what()).find("--max_shard_size '" + std::string(text) + "'"),
                      std::string::npos)
                << e.what();
        }
    }
}

// Once "5GiB" said "unit 'IB'", "abc" said "'BC'", "1e99" said "'99'": every message now
// quotes what the user typed and names the actual fault.
TEST(ShardSize, MessagesQuoteTheUsersText) {
    auto message = [](const char* text) {
        try {
            output::parse_max_shard_size(text);
        } catch (const Error& e) {
            return std::string(e.what());
        }
        return std::string("accepted");
    };
    EXPECT_NE(message("5GiX").find("'5GiX': unknown unit 'GiX'"), std::string::npos)
        << message("5GiX");
    EXPECT_NE(message("abc").find("'abc': there is no number"), std::string::npos)
        << message("abc");
    EXPECT_NE(message("1e99").find("'1e99': the size does not fit in 64 bits"), std::string::npos)
        << message("1e99");
    EXPECT_NE(message("1e99GB").find("'1e99GB': the size does not fit in 64 bits"),
              std::string::npos)
        << message("1e99GB");
    EXPECT_NE(message("5G").find("KiB, MiB, GiB, TiB"), std::string::npos) << message("5G");
}

TEST(ByteSize, BufferSizeAcceptsBothUnitFamilies) {
    EXPECT_EQ(parse_byte_size("16MiB", "--buffer-size"), 16ull << 20);
    EXPECT_EQ(parse_byte_size("16MB", "--buffer-size"), 16'000'000u);
    EXPECT_EQ(parse_byte_size("65536", "--buffer-size"), 65'536u);
    EXPECT_EQ(parse_byte_size("1e6", "--buffer-size"), 1'000'000u);
    EXPECT_THROW(parse_byte_size("1.5", "--buffer-size"), Error);
}

}  // namespace
}  // namespace z2f
