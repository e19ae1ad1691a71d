// Classifier: cache behaviour, stats, thread safety, kind names, Facts helpers.
#include "parser/parser.hpp"

#include <gtest/gtest.h>

#include <set>
#include <thread>

namespace predrop::parser {
namespace {

TEST(DestroyKindNames, RoundTripAndExactSpelling) {
  const char* names[] = {"drop_table", "drop_schema", "drop_owned", "alter_table",
                         "truncate", "drop_matview", "drop_view", "drop_foreign_table"};
  ASSERT_EQ(std::size(names), static_cast<size_t>(kDestroyKindCount));
  for (int i = 0; i < kDestroyKindCount; ++i) {
    const auto kind = static_cast<DestroyKind>(i);
    EXPECT_EQ(to_string(kind), names[i]);
    EXPECT_EQ(destroy_kind_from_string(names[i]), kind);
  }
  EXPECT_EQ(destroy_kind_from_string("DROP_TABLE"), std::nullopt);
  EXPECT_EQ(destroy_kind_from_string("drop"), std::nullopt);
  EXPECT_EQ(destroy_kind_from_string(""), std::nullopt);
}

TEST(Classifier, PrefilteredTextReturnsNullAndIsCounted) {
  Classifier c;
  EXPECT_EQ(c.classify("SELECT abalance FROM pgbench_accounts WHERE aid = $1;"), nullptr);
  EXPECT_EQ(c.classify("COMMIT"), nullptr);
  const auto s = c.stats();
  EXPECT_EQ(s.prefiltered, 2u);
  EXPECT_EQ(s.parsed, 0u);
  EXPECT_EQ(s.cache_hit, 0u);
}

TEST(Classifier, SecondLookupIsACacheHitSharingTheSameFacts) {
  Classifier c;
  auto first = c.classify("DROP TABLE a");
  auto second = c.classify("DROP TABLE a");
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first.get(), second.get());
  EXPECT_TRUE(first->destroys());
  auto s = c.stats();
  EXPECT_EQ(s.parsed, 1u);
  EXPECT_EQ(s.cache_hit, 1u);
  // The key is the exact text: different spacing or case is another entry.
  auto other = c.classify("DROP TABLE  a");
  EXPECT_NE(other.get(), first.get());
  EXPECT_EQ(c.stats().parsed, 2u);
}

TEST(Classifier, LeastRecentlyUsedEntryIsEvicted) {
  Classifier c(2);
  auto a = c.classify("DROP TABLE a");
  auto b = c.classify("DROP TABLE b");
  EXPECT_EQ(c.classify("DROP TABLE a").get(), a.get());  // a is now most recent
  c.classify("DROP TABLE c");                             // evicts b
  EXPECT_EQ(c.stats().parsed, 3u);
  EXPECT_EQ(c.classify("DROP TABLE a").get(), a.get());
  EXPECT_EQ(c.stats().parsed, 3u);
  EXPECT_NE(c.classify("DROP TABLE b").get(), b.get());  // parsed again
  EXPECT_EQ(c.stats().parsed, 4u);
}

TEST(Classifier, ZeroCapacityNeverCaches) {
  Classifier c(0);
  c.classify("DROP TABLE a");
  c.classify("DROP TABLE a");
  EXPECT_EQ(c.stats().parsed, 2u);
  EXPECT_EQ(c.stats().cache_hit, 0u);
}

TEST(Classifier, ParseErrorsAreCountedAndCached) {
  Classifier c;
  auto f = c.classify("DROP TABLE");
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(f->parse_error);
  EXPECT_FALSE(f->error_message.empty());
  ASSERT_EQ(f->statements.size(), 1u);
  EXPECT_TRUE(f->statements[0].unparsed);  // a DROP TABLE without a name: the fallback cannot read it
  c.classify("DROP TABLE");
  const auto s = c.stats();
  EXPECT_EQ(s.parse_error, 1u);
  EXPECT_EQ(s.cache_hit, 1u);
}

TEST(Classifier, ConcurrentClassifyIsConsistent) {
  Classifier c(16);  // smaller than the working set: evictions race with lookups
  const std::vector<std::string> texts = [] {
    std::vector<std::string> v;
    for (int i = 0; i < 40; ++i) v.push_back("DROP TABLE t" + std::to_string(i));
    v.push_back("DROP TABL broken");
    v.push_back("SELECT 1");
    return v;
  }();
  std::atomic<int> failures{0};
  auto worker = [&](int seed) {
    for (int i = 0; i < 2000; ++i) {
      const std::string& sql = texts[(i * 7 + seed) % texts.size()];
      auto f = c.classify(sql);
      if (sql == "SELECT 1") {
        if (f) ++failures;
      } else if (!f) {
        ++failures;
      } else if (sql.rfind("DROP TABLE t", 0) == 0) {
        if (f->statements.size() != 1 || f->statements[0].targets.size() != 1 ||
            "DROP TABLE " + f->statements[0].targets[0].relation.name != sql)
          ++failures;
      } else if (!f->parse_error) {
        ++failures;
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) threads.emplace_back(worker, t);
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  const auto s = c.stats();
  EXPECT_EQ(s.prefiltered + s.parsed + s.cache_hit, 4u * 2000u);
}

TEST(Facts, HelpersReflectStatements) {
  Facts f = classify_uncached("SET search_path TO a; SELECT 1; CALL p()");
  ASSERT_FALSE(f.parse_error);
  EXPECT_EQ(f.statements.size(), 3u);
  EXPECT_FALSE(f.destroys());
  EXPECT_TRUE(f.unresolved());
  EXPECT_TRUE(f.touches_search_path());
  EXPECT_FALSE(f.fingerprint.empty());

  Facts plain = classify_uncached("SELECT 1");
  EXPECT_FALSE(plain.destroys() || plain.unresolved() || plain.touches_search_path());
  EXPECT_TRUE(plain.fingerprint.empty());
}

// What a quarantined table may still use and its own DROP could not let go (issue 22): each object
// a later DROP names, with the schema and method an operator class or family needs.
TEST(Facts, YieldsNameWhatAQuarantinedTableMayStillUse) {
  Facts f = classify_uncached(
      "DROP ROLE a, \"B\"; DROP TABLESPACE IF EXISTS ts1; DROP ACCESS METHOD heap2;"
      " DROP OPERATOR CLASS s.my_ops USING btree; DROP OPERATOR FAMILY my_fam USING hash;"
      " DROP EXTENSION IF EXISTS citext, hstore; SELECT 1");
  ASSERT_EQ(f.statements.size(), 7u);
  EXPECT_TRUE(f.yields());
  EXPECT_FALSE(f.destroys());
  EXPECT_FALSE(f.fingerprint.empty());
  auto names = [&](size_t i) {
    std::vector<std::string> out;
    for (const auto& y : f.statements[i].yields)
      out.push_back(std::string(to_string(y.kind)) + ":" + y.schema + "." + y.name + "/" + y.method);
    return out;
  };
  EXPECT_EQ(names(0), (std::vector<std::string>{"drop_role:.a/", "drop_role:.B/"}));
  EXPECT_EQ(names(1), (std::vector<std::string>{"drop_tablespace:.ts1/"}));
  EXPECT_EQ(names(2), (std::vector<std::string>{"drop_access_method:.heap2/"}));
  EXPECT_EQ(names(3), (std::vector<std::string>{"drop_operator_class:s.my_ops/btree"}));
  EXPECT_EQ(names(4), (std::vector<std::string>{"drop_operator_family:.my_fam/hash"}));
  EXPECT_EQ(names(5), (std::vector<std::string>{"drop_extension:.citext/", "drop_extension:.hstore/"}));
  EXPECT_TRUE(f.statements[6].yields.empty());
  // The scanner fallback (another statement of the text does not parse) keeps the yield and its
  // fingerprint: the ledger row of its hold names one.
  Facts fallback = classify_uncached("DROP ROLE a; SELECT 'x' 'y'");
  ASSERT_TRUE(fallback.parse_error);
  EXPECT_TRUE(fallback.yields());
  EXPECT_FALSE(fallback.fingerprint.empty());
  // Objects no quarantined table can hold on to once detached are no yield.
  EXPECT_FALSE(classify_uncached("DROP TYPE mood; DROP FUNCTION f(); DROP TABLE t; DROP OWNED BY r").yields());
}

TEST(Facts, FingerprintIgnoresLiteralsAndSpacing) {
  Facts a = classify_uncached("TRUNCATE t; SELECT 1");
  Facts b = classify_uncached("truncate   t;  select 2");
  Facts c = classify_uncached("TRUNCATE u; SELECT 1");
  EXPECT_EQ(a.fingerprint, b.fingerprint);
  EXPECT_NE(a.fingerprint, c.fingerprint);
  EXPECT_EQ(a.fingerprint.size(), 16u);  // 64-bit hex
}

TEST(Facts, NormalizedNeverKeepsPasswordsOrLiterals) {
  Facts f = classify_uncached("ALTER ROLE bob PASSWORD 'hunter2'; DROP TABLE t; SELECT 'secret-value'");
  ASSERT_FALSE(f.parse_error);
  EXPECT_EQ(f.normalized.find("hunter2"), std::string::npos) << f.normalized;
  EXPECT_EQ(f.normalized.find("secret-value"), std::string::npos) << f.normalized;
  EXPECT_NE(f.normalized.find("DROP TABLE t"), std::string::npos) << f.normalized;
}

TEST(Facts, DeeplyNestedQueryIsSafeAndSound) {
  // The set_config search walks the tree; past its depth bound it reports unresolved instead
  // of recursing further.
  std::string sql = "SELECT set_config('search_path', 'a', false) FROM t WHERE ";
  for (int i = 0; i < 3000; ++i) sql += "NOT ";  // under bison's own limit
  sql += "true";
  Facts f = classify_uncached(sql);
  ASSERT_FALSE(f.parse_error) << f.error_message;
  ASSERT_EQ(f.statements.size(), 1u);
  EXPECT_TRUE(f.statements[0].unresolved_risk);

  std::string shallow = "SELECT set_config('search_path', 'a', false) FROM t WHERE ";
  for (int i = 0; i < 100; ++i) shallow += "NOT ";
  shallow += "true";
  Facts g = classify_uncached(shallow);
  ASSERT_EQ(g.statements.size(), 1u);
  EXPECT_FALSE(g.statements[0].unresolved_risk);
  EXPECT_TRUE(g.touches_search_path());
}

TEST(Facts, TextAfterNulIsIgnoredLikeTheServer) {
  const std::string sql("DROP TABLE a\0DROP TABLE b", 25);
  Facts f = classify_uncached(sql);
  ASSERT_FALSE(f.parse_error);
  ASSERT_EQ(f.statements.size(), 1u);
  ASSERT_EQ(f.statements[0].targets.size(), 1u);
  EXPECT_EQ(f.statements[0].targets[0].relation.name, "a");
}

TEST(Facts, ParseErrorHasMessageAndAnUnparsedStatement) {
  Facts f = classify_uncached("DROP TABL a -- the typo\n WHERE x = 'secret' AND y = 42");
  EXPECT_TRUE(f.parse_error);
  EXPECT_NE(f.error_message.find("syntax error"), std::string::npos) << f.error_message;
  ASSERT_EQ(f.statements.size(), 1u);
  EXPECT_TRUE(f.statements[0].unparsed);
  EXPECT_TRUE(f.statements[0].targets.empty());
  EXPECT_EQ(f.fingerprint.size(), 16u);
  EXPECT_EQ(f.normalized, "DROP TABL a \n WHERE x = $1 AND y = $2");
  // Constants do not change the fingerprint, words do.
  EXPECT_EQ(classify_uncached("drop tabl A WHERE x = 'other' AND y = 7").fingerprint, f.fingerprint);
  EXPECT_NE(classify_uncached("DROP TABL b WHERE x = 'secret' AND y = 42").fingerprint, f.fingerprint);
}

TEST(Facts, FallbackNeverReportsAnEmptyName) {
  // Invalid UTF-8 (the server refuses it before parsing) cut to 63 bytes on a character boundary
  // leaves nothing: the name is unreadable, found by fuzz_classifier.
  Facts f = classify_uncached("DROP TABLE " + std::string(80, '\xb8') + " garbage");
  EXPECT_TRUE(f.parse_error);
  ASSERT_EQ(f.statements.size(), 1u);
  EXPECT_TRUE(f.statements[0].targets.empty());
  EXPECT_TRUE(f.statements[0].unparsed);
}

TEST(Facts, UnscannableTextWithAKeywordIsUnparsedAndWithheld) {
  Facts f = classify_uncached("SELECT 'abc; DROP TABLE a");
  EXPECT_TRUE(f.parse_error);
  ASSERT_EQ(f.statements.size(), 1u);
  EXPECT_TRUE(f.statements[0].unparsed);
  EXPECT_FALSE(f.fingerprint.empty());
  EXPECT_EQ(f.normalized.find("abc"), std::string::npos) << f.normalized;
  // The fingerprint stops where the unterminated literal begins: its content is not hashed.
  EXPECT_EQ(classify_uncached("SELECT 'other; DROP TABLE b").fingerprint, f.fingerprint);
  EXPECT_EQ(classify_uncached("SELECT 'ü€; DROP TABLE b").fingerprint, f.fingerprint);
  EXPECT_NE(classify_uncached("SELECT x, 'abc; DROP TABLE a").fingerprint, f.fingerprint);
  EXPECT_NE(classify_uncached("DROP TABLE \"abc").fingerprint, f.fingerprint);
  // The scanner reports the position in characters: multibyte ones before the literal must not cut
  // the prefix short (inside the quoted name, which would leave nothing scannable to hash).
  EXPECT_EQ(classify_uncached("SELECT \"ü€\", 'abc; DROP TABLE a").fingerprint,
            classify_uncached("SELECT \"ü€\", 'xyz; DROP TABLE a").fingerprint);
  EXPECT_NE(classify_uncached("SELECT \"ü€\", 'abc; DROP TABLE a").fingerprint,
            classify_uncached("'abc; DROP TABLE a").fingerprint);
}

TEST(Facts, StandardConformingStringsOffLexesBackslashEscapes) {
  // With the setting off, 'a\'' is the literal a' and the DROP is a statement of its own; with it
  // on, all of it after SELECT is one literal.
  const std::string text = "SELECT 'a\\''; DROP TABLE hidden; --'";
  Facts on = classify_uncached(text, true);
  EXPECT_FALSE(on.parse_error);
  EXPECT_FALSE(on.destroys());
  Facts off = classify_uncached(text, false);
  EXPECT_FALSE(off.parse_error) << off.error_message;
  ASSERT_EQ(off.statements.size(), 2u);
  ASSERT_EQ(off.statements[1].targets.size(), 1u);
  EXPECT_EQ(off.statements[1].targets[0].relation.name, "hidden");
  EXPECT_FALSE(off.fingerprint.empty());
  EXPECT_EQ(off.normalized.find("a\\'"), std::string::npos) << off.normalized;
  // What the scanner fallback lexes follows the setting too: an unterminated literal when on.
  Facts fallback_off = classify_uncached("SELECT 'a\\' x'; DROP TABLE t", false);
  ASSERT_TRUE(fallback_off.destroys());
  Facts fallback_on = classify_uncached("SELECT 'a\\' x'; DROP TABLE t", true);
  EXPECT_FALSE(fallback_on.destroys());
  // The setting does not leak into the next text classified on the thread.
  EXPECT_FALSE(classify_uncached(text).destroys());
}

TEST(Classifier, StandardConformingStringsOffIsCachedApart) {
  Classifier c(16);
  const std::string text = "SELECT 'a\\''; DROP TABLE hidden; --'";
  auto on = c.classify(text, true);
  auto off = c.classify(text, false);
  ASSERT_TRUE(on && off);
  EXPECT_FALSE(on->destroys());
  EXPECT_TRUE(off->destroys());
  EXPECT_EQ(c.classify(text, false).get(), off.get());
  EXPECT_EQ(c.classify(text, true).get(), on.get());
}

}  // namespace
}  // namespace predrop::parser
