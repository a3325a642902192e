// Expected strings: Python 3.11 json.dumps(s) for the Python writer; serde_json's escape table
// (only '"', '\\' and U+0000..U+001F escaped, lowercase \u00xx) for the Rust writer.
#include "output/json_escape.hpp"

#include <gtest/gtest.h>

#include "common/errors.hpp"
#include "common/utf8.hpp"

namespace z2f {
namespace {

std::string python(std::string_view text) {
    std::string out;
    output::append_json_string_python(out, text, "test string");
    return out;
}

std::string serde(std::string_view text) {
    std::string out;
    output::append_json_string_serde(out, text, "test string");
    return out;
}

using namespace std::string_view_literals;

TEST(JsonEscape, PythonEnsureAscii) {
    EXPECT_EQ(python("a.weight"), R"("a.weight")");
    EXPECT_EQ(python(""), R"("")");
    EXPECT_EQ(python("q\"b\\s/"), R"("q\"b\\s/")");
    EXPECT_EQ(python("\b\f\n\r\t"), R"("\b\f\n\r\t")");
    EXPECT_EQ(python("\x00\x01\x1f\x7f"sv), R"("\u0000\u0001\u001f\u007f")");
    EXPECT_EQ(python("\xc3\xa9"), R"("\u00e9")");                        // é
    EXPECT_EQ(python("\xe5\x90\x8d\xe5\xad\x97"), R"("\u540d\u5b57")");  // 名字
    EXPECT_EQ(python("\xf0\x9f\x98\x80"), R"("\ud83d\ude00")");          // U+1F600
    EXPECT_EQ(python("mixed\x7f\xc2\x80\xdf\xbf\xe0\xa0\x80\xef\xbf\xbf\xf0\x90\x80\x80"
                     "\xf4\x8f\xbf\xbf"),
              R"("mixed\u007f\u0080\u07ff\u0800\uffff\ud800\udc00\udbff\udfff")");
}

TEST(JsonEscape, PythonWritesLoneSurrogatesLikePython) {
    // Python strings may carry lone surrogates (pickle uses 'surrogatepass').
    EXPECT_EQ(python("\xed\xa0\x80"), R"("\ud800")");
    EXPECT_EQ(python("\xed\xbf\xbf"), R"("\udfff")");
    // A high and a low surrogate as two code points print like the real pair.
    EXPECT_EQ(python("\xed\xa0\xbd\xed\xb8\x80"), R"("\ud83d\ude00")");
}

TEST(JsonEscape, SerdeCompact) {
    EXPECT_EQ(serde("a.weight"), R"("a.weight")");
    EXPECT_EQ(serde("q\"b\\s/"), R"("q\"b\\s/")");
    EXPECT_EQ(serde("\b\f\n\r\t"), R"("\b\f\n\r\t")");
    EXPECT_EQ(serde("\x00\x01\x0b\x1f"sv), R"("\u0000\u0001\u000b\u001f")");
    // U+007F and non-ASCII stay raw UTF-8.
    EXPECT_EQ(serde("\x7f\xc3\xa9\xf0\x9f\x98\x80"), "\"\x7f\xc3\xa9\xf0\x9f\x98\x80\"");
}

TEST(JsonEscape, InvalidUtf8IsAnInputError) {
    const std::string_view bad[] = {
        "\x80",                  // lone continuation byte
        "\xc0\xaf",              // overlong '/'
        "\xc3",                  // truncated
        "\xe0\x80\xaf",          // overlong
        "\xf4\x90\x80\x80",      // above U+10FFFF
        "\xf8\x88\x80\x80\x80",  // 5-byte form
        "a\xffz",
    };
    for (std::string_view text : bad) {
        EXPECT_FALSE(is_valid_utf8(text, Surrogates::kRefuse)) << output::printable_bytes(text);
        try {
            python(text);
            ADD_FAILURE() << output::printable_bytes(text);
        } catch (const Error& e) {
            EXPECT_EQ(e.kind(), ErrorKind::kInput);
            EXPECT_NE(std::string(e.what()).find("not valid UTF-8"), std::string::npos);
        }
        EXPECT_THROW(serde(text), Error) << output::printable_bytes(text);
    }
    // Surrogates are Python-only.
    EXPECT_FALSE(is_valid_utf8("\xed\xa0\x80", Surrogates::kRefuse));
    EXPECT_THROW(serde("\xed\xa0\x80"), Error);
    EXPECT_TRUE(is_valid_utf8("\xed\x9f\xbf", Surrogates::kRefuse));  // U+D7FF
    EXPECT_TRUE(is_valid_utf8("", Surrogates::kRefuse));
    // The pickle machine decodes as Python does, with surrogatepass.
    EXPECT_TRUE(is_valid_utf8("\xed\xa0\x80", Surrogates::kAllow));
    EXPECT_FALSE(is_valid_utf8("\xc0\xaf", Surrogates::kAllow));
}

TEST(JsonEscape, PrintableBytes) {
    EXPECT_EQ(output::printable_bytes("ab\\\n\xff"), "ab\\x5c\\x0a\\xff");
}

}  // namespace
}  // namespace z2f
