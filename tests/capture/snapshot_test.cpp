// Pure snapshot functions against the reference application's acceptance cases (hashing, name
// handling and array parsing)
// and PostgreSQL's array text grammar.
#include <gtest/gtest.h>
#include <limits>

#include <nlohmann/json.hpp>

#include "capture/capture.hpp"
#include "capture/snapshot.hpp"
#include "tests/capture/profile_json_reference.hpp"

using namespace predrop::capture;

namespace {
const std::vector<std::string> kMeta = {"_source_dataset_id", "_ingested_at", "_source_url"};
ProfileBounds bounds;
}  // namespace

TEST(SchemaHash, OrderDoesNotMatter) {  // §9.1
  EXPECT_EQ(schema_hash({"a", "b", "c"}, kMeta), schema_hash({"c", "a", "b"}, kMeta));
}

TEST(SchemaHash, MetadataColumnsExcluded) {  // §9.2
  EXPECT_EQ(schema_hash({"a", "b"}, kMeta), schema_hash({"a", "b", "_source_dataset_id"}, kMeta));
  EXPECT_EQ(schema_hash({"a", "b"}, kMeta), schema_hash({"_ingested_at", "a", "_source_url", "b"}, kMeta));
}

TEST(SchemaHash, RenameChangesHash) {  // §9.3
  EXPECT_NE(schema_hash({"a", "b"}, kMeta), schema_hash({"a", "b_renamed"}, kMeta));
}

TEST(SchemaHash, StartsWithCollectorSuffix) {  // §9.4
  // The collector's _schema_suffix excludes only _source_dataset_id and keeps 8 hex characters.
  std::vector<std::string> cols = {"Provincia", "anio", "monto", "_source_dataset_id"};
  std::string full = schema_hash(cols, kMeta);
  std::string suffix = schema_hash(cols, {"_source_dataset_id"}).substr(0, 8);
  EXPECT_EQ(full.size(), 40u);
  EXPECT_EQ(full.substr(0, 8), suffix);
  // Fixed value: sha1("Provincia|anio|monto"), uppercase sorts before lowercase by code point.
  EXPECT_EQ(full, "e185c0d9fbd2ada768ab1a4fd150a91114b9967a");
}

TEST(SchemaHash, KnownDigests) {
  EXPECT_EQ(schema_hash({}, kMeta), "da39a3ee5e6b4b0d3255bfef95601890afd80709");  // sha1("")
  EXPECT_EQ(schema_hash({"b", "a"}, kMeta), "9abe6de24a871364bf412a1c301698b5ed30dbb7");  // sha1("a|b")
  // Code-point order, not locale: "Z" (0x5A) < "a" (0x61) < "é" (0xC3 0xA9).
  EXPECT_EQ(schema_hash({"é", "a", "Z"}, {}), "cafc7d044b5de751fe78474bc3d5163afd585b40");
  EXPECT_EQ(schema_hash({"x"}, {}), "11f6ad8ec52a2984abaafd7c3b516503785c2072");  // sha1("x")
}

TEST(SchemaHash, ExcludedListIsConfigurable) {
  EXPECT_EQ(schema_hash({"a", "geom"}, {"geom"}), schema_hash({"a"}, {}));
  EXPECT_NE(schema_hash({"a", "_ingested_at"}, {}), schema_hash({"a"}, {}));
}

TEST(ParseArrayNaive, ListStaysList) {  // §9.6
  EXPECT_EQ(parse_pg_array("{a,b}", bounds, true), (std::vector<std::string>{"a", "b"}));
}

TEST(ParseArrayNaive, QuotedAndUnicode) {  // §9.7
  EXPECT_EQ(parse_pg_array(R"({"Buenos Aires",Córdoba})", bounds, true),
            (std::vector<std::string>{"Buenos Aires", "Córdoba"}));
}

TEST(ParseArrayNaive, EmptyGivesEmpty) {  // §9.8
  EXPECT_TRUE(parse_pg_array("{}", bounds, true).empty());
  EXPECT_TRUE(parse_pg_array("", bounds, true).empty());
  EXPECT_TRUE(parse_pg_array("  {}  ", bounds, true).empty());
}

TEST(ParseArrayNaive, CappedTo20) {  // §9.9
  std::string t = "{";
  for (int i = 0; i < 500; ++i) t += (i ? "," : "") + std::to_string(i);
  t += "}";
  auto v = parse_pg_array(t, bounds, true);
  ASSERT_EQ(v.size(), 20u);
  EXPECT_EQ(v.front(), "0");
  EXPECT_EQ(v.back(), "19");
}

TEST(ParseArrayNaive, ClippedTo120) {  // §9.10
  auto v = parse_pg_array("{" + std::string(5000, 'x') + "}", bounds, true);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].size(), 120u);
}

TEST(ParseArrayNaive, ReproducesTheReferenceFaults) {
  // A comma inside a quoted value is split; first 20 parts are taken before empties are dropped.
  EXPECT_EQ(parse_pg_array(R"({"a,b",c})", bounds, true), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(parse_pg_array(R"({"",x})", bounds, true), (std::vector<std::string>{"x"}));
  std::string t = "{";
  for (int i = 0; i < 25; ++i) t += (i ? "," : "") + std::string(i % 2 ? "v" : "\"\"");
  t += "}";
  EXPECT_EQ(parse_pg_array(t, bounds, true).size(), 10u);  // 20 parts, half of them empty
  // Backslash escapes are kept verbatim.
  EXPECT_EQ(parse_pg_array(R"({"say \"hi\""})", bounds, true), (std::vector<std::string>{R"(say \"hi\)"}));
}

TEST(ParseArray, QuotesEscapesCommas) {
  EXPECT_EQ(parse_pg_array(R"({"a,b","say \"hi\"","back\\slash",plain})", bounds),
            (std::vector<std::string>{"a,b", "say \"hi\"", "back\\slash", "plain"}));
  EXPECT_EQ(parse_pg_array(R"({"Buenos Aires",Córdoba})", bounds),
            (std::vector<std::string>{"Buenos Aires", "Córdoba"}));
  EXPECT_EQ(parse_pg_array(R"({"{1,2}","{3}"})", bounds), (std::vector<std::string>{"{1,2}", "{3}"}));
}

TEST(ParseArray, EmptyStringsAndNull) {
  EXPECT_EQ(parse_pg_array(R"({"",x,NULL,"NULL",null})", bounds), (std::vector<std::string>{"", "x", "NULL"}));
  EXPECT_TRUE(parse_pg_array("{}", bounds).empty());
  EXPECT_TRUE(parse_pg_array("", bounds).empty());
  EXPECT_TRUE(parse_pg_array("garbage", bounds).empty());
}

TEST(ParseArray, WhitespaceAndDimensions) {
  EXPECT_EQ(parse_pg_array("{ a , b c ,\"  d \"}", bounds), (std::vector<std::string>{"a", "b c", "  d "}));
  EXPECT_EQ(parse_pg_array("[0:1]={x,y}", bounds), (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(parse_pg_array("{{1,2},{3,4}}", bounds), (std::vector<std::string>{"1", "2", "3", "4"}));
}

TEST(ParseArray, BoundsApply) {
  std::string t = "{";
  for (int i = 0; i < 500; ++i) t += (i ? "," : "") + std::string("\"v,") + std::to_string(i) + "\"";
  t += "}";
  auto v = parse_pg_array(t, bounds);
  ASSERT_EQ(v.size(), 20u);
  EXPECT_EQ(v[19], "v,19");
  auto clipped = parse_pg_array("{\"" + std::string(300, 'y') + "\"}", bounds);
  EXPECT_EQ(clipped[0], std::string(120, 'y'));
  ProfileBounds small{3, 2, 300};
  EXPECT_EQ(parse_pg_array("{abc,ñandú,x,y}", small), (std::vector<std::string>{"ab", "ña", "x"}));
}

TEST(ClipChars, CountsCodePoints) {
  EXPECT_EQ(clip_chars("Córdoba", 2), "Có");
  EXPECT_EQ(clip_chars("日本語テキスト", 3), "日本語");
  EXPECT_EQ(clip_chars("😀😀😀", 1), "😀");
  EXPECT_EQ(clip_chars("abc", 10), "abc");
  EXPECT_EQ(clip_chars("abc", 0), "");
  std::string five_k;
  for (int i = 0; i < 5000; ++i) five_k += "é";
  std::string c = clip_chars(five_k, 120);
  EXPECT_EQ(c.size(), 240u);  // 120 two-byte code points, no sequence split
}

TEST(ProfileJson, ReferenceKeysAndUnescapedUnicode) {
  ColumnProfile a{"provincia", 1, "text", 0.25, -1.0, {"Córdoba", "a\"b"}, {}};
  ColumnProfile b{"monto", 3, "numeric(10,2)", std::nullopt, std::nullopt, {}, {"1", "2"}};
  std::string text = columns_profile_json({a, b});
  EXPECT_NE(text.find("Córdoba"), std::string::npos);  // not \u00f3
  auto j = nlohmann::json::parse(text);
  ASSERT_EQ(j.size(), 2u);
  for (const auto& key : {"name", "ordinal", "pg_type", "null_frac", "n_distinct", "most_common_vals", "histogram_sample"})
    EXPECT_TRUE(j[0].contains(key)) << key;
  EXPECT_EQ(j[0].size(), 7u);
  EXPECT_EQ(j[1]["ordinal"], 3);
  EXPECT_TRUE(j[1]["null_frac"].is_null());
  EXPECT_EQ(j[0]["n_distinct"], -1.0);
  EXPECT_EQ(j[0]["most_common_vals"][1], "a\"b");
}

// The direct writer gives the text nlohmann's ordered_json gave, byte for byte: escapes, control
// characters, every kind of UTF-8 sequence and of bad one, and the numbers' shortest forms.
TEST(ProfileJson, WriterMatchesTheDocumentItReplaced) {
  const std::vector<std::string> texts = {
      "", "plain", "q\"uote", "back\\slash", std::string("nul\0byte", 8), "\b\f\n\r\t", "\x01\x1f\x7f", "Córdoba",
      "日本語", "😀", "\xc3", "\xc3(", "\xe2\x82", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xc0\xaf", "\xe0\x80\xaf",
      "\xf0\x80\x80\xaf", "\xff\xfe", "a\x80b", "ok\xf5\x80\x80\x80", "end\xe6\x97"};
  const std::vector<std::optional<double>> numbers = {std::nullopt, 0.0, -1.0, 0.1, 1.0 / 3, 1e-300, -0.5, 123456789.0,
                                                      5e-324, std::numeric_limits<double>::quiet_NaN(),
                                                      std::numeric_limits<double>::infinity()};
  std::vector<ColumnProfile> columns;
  for (size_t i = 0; i < texts.size(); ++i)
    columns.push_back({texts[i], static_cast<int>(i) - 1, texts[(i + 3) % texts.size()], numbers[i % numbers.size()],
                       numbers[(i + 5) % numbers.size()], {texts[(i + 1) % texts.size()], texts[(i + 2) % texts.size()]},
                       i % 2 ? std::vector<std::string>{} : texts});
  for (size_t i = 0; i < columns.size(); ++i) {
    std::vector<ColumnProfile> one{columns[i]};
    EXPECT_EQ(columns_profile_json(one), test::columns_profile_json_reference(one)) << "column " << i;
  }
  EXPECT_EQ(columns_profile_json(columns), test::columns_profile_json_reference(columns));
  EXPECT_EQ(columns_profile_json({}), test::columns_profile_json_reference({}));
}

TEST(ArrayLiteral, EscapesAndNull) {
  EXPECT_EQ(pg_array_literal({std::string("a"), std::nullopt, std::string("x\"y\\z"), std::string("")}),
            R"({"a",NULL,"x\"y\\z",""})");
  // Escapes at either end and side by side.
  const std::string literal = pg_array_literal({std::string("\"\\\""), std::string("ab\\"), std::string("\"cd")});
  EXPECT_EQ(literal, R"({"\"\\\"","ab\\","\"cd"})");
  EXPECT_EQ(parse_pg_array(literal, bounds), (std::vector<std::string>{"\"\\\"", "ab\\", "\"cd"}));
  // Round trip through the parser.
  EXPECT_EQ(parse_pg_array(pg_array_literal({std::string("a,b"), std::string("c\"")}), bounds),
            (std::vector<std::string>{"a,b", "c\""}));
}

TEST(SplitQualified, ReferenceCases) {
  EXPECT_EQ(split_qualified("raw.foo"), (std::pair<std::string, std::string>{"raw", "foo"}));
  EXPECT_EQ(split_qualified("cache_foo"), (std::pair<std::string, std::string>{"public", "cache_foo"}));
  EXPECT_EQ(split_qualified("\"raw\".\"foo\""), (std::pair<std::string, std::string>{"raw", "foo"}));
  EXPECT_EQ(split_qualified("\"a.b\".c"), (std::pair<std::string, std::string>{"a.b", "c"}));
}

TEST(MaskConninfo, NoPasswordSurvives) {
  EXPECT_EQ(mask_conninfo("host=x password=s3cret user=u"), "host=x password=*** user=u");
  EXPECT_EQ(mask_conninfo("host=x password = 'a b\\' c' user=u"), "host=x password = *** user=u");
  EXPECT_EQ(mask_conninfo("postgresql://u:s3cret@h:5432/db"), "postgresql://u:***@h:5432/db");
  EXPECT_EQ(mask_conninfo("postgres://h/db?password=s3cret&sslmode=require").find("s3cret"), std::string::npos);
  EXPECT_EQ(mask_conninfo("host=x user=u"), "host=x user=u");
}
