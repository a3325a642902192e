// Expected byte counts are what huggingface_hub's parse_size_to_int returns for the same
// strings (checked with Python 3.11: int(float(number) * 10**k)).
#include "output/shard_size.hpp"

#include <gtest/gtest.h>

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
    EXPECT_EQ(output::parse_max_shard_size("-0KB"), 0u);
    EXPECT_EQ(output::parse_max_shard_size("9.3e-10KB"), 0u);
}

TEST(ShardSize, PlainIntegerIsBytesAndNoneMeansNoSharding) {
    EXPECT_EQ(output::parse_max_shard_size("5000"), 5000u);
    EXPECT_EQ(output::parse_max_shard_size("0"), 0u);
    EXPECT_EQ(output::parse_max_shard_size("18446744073709551615"), 18446744073709551615u);
    EXPECT_EQ(output::parse_max_shard_size("none"), std::nullopt);
    EXPECT_EQ(output::parse_max_shard_size("None"), std::nullopt);
    EXPECT_EQ(output::parse_max_shard_size(" NONE "), std::nullopt);
}

TEST(ShardSize, RejectionsAreUsageErrors) {
    const char* bad[] = {
        "",           " ",
        "5GiB",       "5MiB",
        "5G",         "5B",
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
            output::parse_max_shard_size(text);
            ADD_FAILURE() << "accepted '" << text << "'";
        } catch (const Error& e) {
            EXPECT_EQ(e.kind(), ErrorKind::kUsage) << text;
            EXPECT_NE(std::string(e.what()).find("--max_shard_size"), std::string::npos);
        }
    }
}

TEST(ShardSize, GibMessageExplainsDecimalUnits) {
    try {
        output::parse_max_shard_size("5GiB");
        FAIL();
    } catch (const Error& e) {
        const std::string message = e.what();
        EXPECT_NE(message.find("'5GiB'"), std::string::npos) << message;
        EXPECT_NE(message.find("unit 'IB' is not supported"), std::string::npos) << message;
        EXPECT_NE(message.find("GiB are not accepted"), std::string::npos) << message;
    }
}

}  // namespace
}  // namespace z2f
