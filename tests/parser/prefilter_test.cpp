// may_matter(): must say false for the hot-path traffic and true for anything the classifier
// could report (the corpus test checks the latter for every corpus case as well).
#include "parser/parser.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <iostream>
#include <string>

namespace predrop::parser {
namespace {

TEST(Prefilter, HotPathStatementsAreFilteredOut) {
  EXPECT_FALSE(may_matter("SELECT abalance FROM pgbench_accounts WHERE aid = $1;"));
  EXPECT_FALSE(may_matter("UPDATE pgbench_accounts SET abalance = abalance + $1 WHERE aid = $2;"));
  EXPECT_FALSE(may_matter("INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES ($1, $2, $3, $4, CURRENT_TIMESTAMP);"));
  EXPECT_FALSE(may_matter("BEGIN"));
  EXPECT_FALSE(may_matter("COMMIT"));
  EXPECT_FALSE(may_matter("select double_value, done, undo, todo from t"));
  EXPECT_FALSE(may_matter(""));
  EXPECT_FALSE(may_matter("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE"));
  EXPECT_FALSE(may_matter("SET statement_timeout = 0"));
}

TEST(Prefilter, KeywordsPassInAnyCase) {
  for (const char* sql : {"DROP TABLE a", "drop table a", "DrOp TaBlE a", "ALTER TABLE t DROP COLUMN c",
                          "truncate t", "TRUNCATE t", "EXECUTE s", "CALL p()", "call p()",
                          "SET search_path = a", "set SEARCH_PATH to a", "RESET ALL", "reset search_path",
                          "SELECT set_config('search_path', 'a', false)", "select SET_CONFIG($1, $2, $3)",
                          "SET SCHEMA 'x'", "DISCARD ALL", "UPDATE pg_settings SET setting = $1 WHERE name = $2",
                          "SET U&\"search\\005fpath\" TO a"}) {
    EXPECT_TRUE(may_matter(sql)) << sql;
  }
}

TEST(Prefilter, DoIsMatchedAsAWholeWord) {
  EXPECT_TRUE(may_matter("DO $$ begin drop table x; end $$"));
  EXPECT_TRUE(may_matter("do 'begin null; end'"));
  EXPECT_TRUE(may_matter("DO"));
  EXPECT_TRUE(may_matter("/*c*/DO $x$ begin null; end $x$"));  // '/' before DO: still a word
  EXPECT_FALSE(may_matter("DO$x$ begin null; end $x$"));  // one identifier "do$x$": a syntax error
  EXPECT_TRUE(may_matter("select 1;do $$ begin null; end $$"));
  EXPECT_TRUE(may_matter("--c\ndo $$ begin null; end $$"));
  EXPECT_TRUE(may_matter("\tDo\n$$ begin null; end $$"));
  EXPECT_TRUE(may_matter("DO/*x*/$$ begin null; end $$"));
  EXPECT_TRUE(may_matter("DO LANGUAGE plpgsql $$ begin null; end $$"));
  EXPECT_FALSE(may_matter("select dox, xdo, do_it, do$x, \xc3\xa9" "do from t"));
}

TEST(Prefilter, KeywordAtEndOfTextAndPartialKeywords) {
  EXPECT_TRUE(may_matter("x drop"));
  EXPECT_FALSE(may_matter("x dro"));
  EXPECT_FALSE(may_matter("searc"));
  EXPECT_FALSE(may_matter("search_pat"));
  EXPECT_TRUE(may_matter("search_path"));
  // A view into a larger buffer: bytes past the end must not be read as part of a keyword.
  const std::string buffer = "select 1; drop table t";
  EXPECT_FALSE(may_matter(std::string_view(buffer).substr(0, 12)));
  EXPECT_TRUE(may_matter(std::string_view(buffer).substr(0, 14)));
}

TEST(Prefilter, FalsePositivesAreAllowedButCheapToAvoid) {
  // A keyword inside a literal or identifier passes (sound, a parse finds nothing).
  EXPECT_TRUE(may_matter("SELECT 'drop' FROM t"));
  EXPECT_TRUE(may_matter("SELECT * FROM information_schema.tables"));
}

// Not a benchmark, a guard against an accidental quadratic or allocating prefilter.
TEST(Prefilter, IsCheapOnThePgbenchSelect) {
  const std::string_view sql = "SELECT abalance FROM pgbench_accounts WHERE aid = $1;";
  constexpr int kIterations = 200000;
  int hits = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kIterations; ++i) hits += may_matter(sql) ? 1 : 0;
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(hits, 0);
  const double per_call = static_cast<double>(ns) / kIterations;
  std::cout << "may_matter(pgbench select): " << per_call << " ns/call\n";
  EXPECT_LT(per_call, 5000.0);  // generous: loaded shared machines, sanitizer builds
}

}  // namespace
}  // namespace predrop::parser
