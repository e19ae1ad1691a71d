// Shape mode (issue 15): the facts the "after" capture needs, the prefilter that lets them
// through, and the cache keeping the two modes apart. The per-statement forms are corpus cases
// (corpus/90_shape_changes.sqlcases); this file holds what a corpus case cannot say.
#include "parser/parser.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace predrop::parser {
namespace {

std::vector<ShapeChange> changes_of(const Facts& f) {
  std::vector<ShapeChange> out;
  for (const Statement& s : f.statements) out.insert(out.end(), s.changes.begin(), s.changes.end());
  return out;
}

ShapeChange create(std::string schema, std::string name) {
  return ShapeChange{ShapeChange::Kind::create, RelationName{std::move(schema), std::move(name)}};
}
ShapeChange alter(std::string schema, std::string name) {
  return ShapeChange{ShapeChange::Kind::alter, RelationName{std::move(schema), std::move(name)}};
}

TEST(ShapeChanges, OnlyReportedWhenAskedFor) {
  for (const char* sql : {"CREATE TABLE t (a int)", "ALTER TABLE t DROP COLUMN a", "REFRESH MATERIALIZED VIEW m",
                          "SELECT 1 INTO t", "ALTER TABLE t RENAME TO u"}) {
    EXPECT_FALSE(classify_uncached(sql).changes_shape()) << sql;
    EXPECT_TRUE(classify_uncached(sql, true, true).changes_shape()) << sql;
    EXPECT_TRUE(classify_uncached(sql, false, true).changes_shape()) << sql;
  }
}

TEST(ShapeChanges, AddColumnIsHeldOnlyInShapeMode) {
  const Facts plain = classify_uncached("ALTER TABLE s.t ADD COLUMN c int");
  EXPECT_FALSE(plain.destroys());
  EXPECT_TRUE(plain.fingerprint.empty());
  const Facts shape = classify_uncached("ALTER TABLE s.t ADD COLUMN c int", true, true);
  ASSERT_TRUE(shape.destroys());
  ASSERT_EQ(shape.statements.at(0).targets.size(), 1u);
  EXPECT_EQ(shape.statements[0].targets[0].kind, DestroyKind::alter_table);
  EXPECT_EQ(shape.statements[0].targets[0].action, "ADD COLUMN c");
  EXPECT_EQ(changes_of(shape), std::vector{alter("s", "t")});
  // With another action the ADD joins it in shape mode, and stays out otherwise.
  EXPECT_EQ(classify_uncached("ALTER TABLE t ADD c int, DROP d").statements[0].targets.at(0).action, "DROP COLUMN d");
  EXPECT_EQ(classify_uncached("ALTER TABLE t ADD c int, DROP d", true, true).statements[0].targets.at(0).action,
            "ADD COLUMN c, DROP COLUMN d");
}

TEST(ShapeChanges, NewNamesAfterRenameAndSetSchema) {
  EXPECT_EQ(changes_of(classify_uncached("ALTER TABLE \"S\".t RENAME TO \"New\"", true, true)),
            std::vector{alter("S", "New")});
  EXPECT_EQ(changes_of(classify_uncached("ALTER TABLE t RENAME TO u", true, true)), std::vector{alter("", "u")});
  EXPECT_EQ(changes_of(classify_uncached("ALTER TABLE a.t SET SCHEMA \"B\"", true, true)), std::vector{alter("B", "t")});
  EXPECT_EQ(changes_of(classify_uncached("ALTER TABLE t SET SCHEMA b", true, true)), std::vector{alter("b", "t")});
  EXPECT_EQ(changes_of(classify_uncached("ALTER TABLE a.t RENAME COLUMN x TO y", true, true)),
            std::vector{alter("a", "t")});
  // The destroy target keeps the old name: that is what the "before" is taken of.
  EXPECT_EQ(classify_uncached("ALTER TABLE a.t SET SCHEMA b", true, true).statements[0].targets.at(0).relation,
            (RelationName{"a", "t"}));
}

TEST(ShapeChanges, TemporaryRelationsAreOutOfScope) {
  for (const char* sql : {"CREATE TEMP TABLE t (a int)", "CREATE TEMPORARY TABLE t AS SELECT 1", "SELECT 1 INTO TEMP t",
                          "CREATE TABLE pg_temp.t (a int)", "ALTER TABLE pg_temp.t ADD COLUMN c int",
                          "ALTER TABLE pg_temp_2.t RENAME TO u", "ALTER TABLE pg_temp.t SET SCHEMA public",
                          "CREATE TEMP TABLE t (LIKE u)"})
    EXPECT_FALSE(classify_uncached(sql, true, true).changes_shape()) << sql;
}

TEST(ShapeChanges, MultiStatementTextsKeepStatementOrder) {
  const Facts f = classify_uncached(
      "CREATE TABLE a (x int); SELECT 1; create table \"Q\".\"B\" as select 2; select * into c from a; "
      "CREATE TEMP TABLE d (x int); REFRESH MATERIALIZED VIEW m.v",
      true, true);
  ASSERT_EQ(f.statements.size(), 6u);
  EXPECT_EQ(f.statements[0].changes, std::vector{create("", "a")});
  EXPECT_TRUE(f.statements[1].changes.empty());
  EXPECT_EQ(f.statements[2].changes, std::vector{create("Q", "B")});
  EXPECT_EQ(f.statements[3].changes, std::vector{create("", "c")});
  EXPECT_TRUE(f.statements[4].changes.empty());
  EXPECT_EQ(f.statements[5].changes, std::vector{alter("m", "v")});
}

TEST(ShapeChanges, FingerprintAndNormalizedAreSetForTheAfterRow) {
  const Facts f = classify_uncached("CREATE TABLE t (a int DEFAULT 42, b text DEFAULT 'secret')", true, true);
  ASSERT_TRUE(f.changes_shape());
  EXPECT_FALSE(f.destroys());
  EXPECT_FALSE(f.fingerprint.empty());
  EXPECT_FALSE(f.normalized.empty());
  EXPECT_EQ(f.normalized.find("secret"), std::string::npos) << f.normalized;
  // The same text without shape mode reports nothing, so it needs no fingerprint.
  EXPECT_TRUE(classify_uncached("CREATE TABLE t (a int DEFAULT 42, b text DEFAULT 'secret')").fingerprint.empty());
  // A text the parser rejects: the fingerprint is the token hash.
  const Facts rejected = classify_uncached("CREATE TABLE good (a int); CREATE TABLE bad (a int int)", true, true);
  ASSERT_TRUE(rejected.parse_error);
  EXPECT_TRUE(rejected.changes_shape());
  EXPECT_FALSE(rejected.fingerprint.empty());
}

TEST(ShapeChanges, TwoPhaseCommitGids) {
  const Facts f = classify_uncached("PREPARE TRANSACTION 'a''b'; COMMIT PREPARED 'g1'; ROLLBACK PREPARED 'g2'", true, true);
  ASSERT_EQ(f.statements.size(), 3u);
  EXPECT_EQ(f.statements[0].txn, TxnControl::prepare);
  EXPECT_EQ(f.statements[0].savepoint, "a'b");
  EXPECT_EQ(f.statements[1].txn, TxnControl::commit_prepared);
  EXPECT_EQ(f.statements[1].savepoint, "g1");
  EXPECT_EQ(f.statements[2].txn, TxnControl::rollback_prepared);
  EXPECT_EQ(f.statements[2].savepoint, "g2");
  // Without shape mode: as before, the prepared transaction is not this session's business.
  const Facts plain = classify_uncached("PREPARE TRANSACTION 'a''b'; COMMIT PREPARED 'g1'; ROLLBACK PREPARED 'g2'");
  EXPECT_EQ(plain.statements[0].txn, TxnControl::prepare);
  EXPECT_EQ(plain.statements[0].savepoint, "");
  EXPECT_EQ(plain.statements[1].txn, TxnControl::none);
  EXPECT_EQ(plain.statements[2].txn, TxnControl::none);
  // The other transaction control is the same in both modes.
  const Facts sp = classify_uncached("SAVEPOINT s1; RELEASE s1; ROLLBACK TO s2; BEGIN; COMMIT", true, true);
  EXPECT_EQ(sp.statements[0].txn, TxnControl::savepoint);
  EXPECT_EQ(sp.statements[0].savepoint, "s1");
  EXPECT_EQ(sp.statements[1].txn, TxnControl::release);
  EXPECT_EQ(sp.statements[2].txn, TxnControl::rollback_to);
  EXPECT_EQ(sp.statements[2].savepoint, "s2");
  EXPECT_EQ(sp.statements[3].txn, TxnControl::begin);
  EXPECT_EQ(sp.statements[4].txn, TxnControl::commit);
}

TEST(ShapePrefilter, DefaultModeIsUnchanged) {
  for (const char* sql : {"CREATE TABLE t (a int)", "SELECT 1 INTO t", "REFRESH MATERIALIZED VIEW m", "SAVEPOINT s",
                          "ROLLBACK", "RELEASE s", "PREPARE TRANSACTION 'g'", "COMMIT PREPARED 'g'"})
    EXPECT_FALSE(may_matter(sql)) << sql;
}

TEST(ShapePrefilter, PassesShapeChangesAndTheirTransactionControl) {
  for (const char* sql : {"CREATE TABLE t (a int)", "create materialized view m as select 1", "CrEaTe TABLE t AS SELECT 1",
                          "SELECT 1 INTO t", "select * into table t from u", "WITH x AS (SELECT 1) SELECT * INTO t FROM x",
                          "REFRESH MATERIALIZED VIEW m", "SAVEPOINT s", "ROLLBACK", "ROLLBACK TO s", "RELEASE s",
                          "release savepoint s", "PREPARE TRANSACTION 'g'", "COMMIT PREPARED 'g'",
                          "ROLLBACK PREPARED 'g'", "ALTER TABLE t ADD COLUMN c int", "DROP TABLE t"})
    EXPECT_TRUE(may_matter(sql, true)) << sql;
}

TEST(ShapePrefilter, HotPathStaysOut) {
  for (const char* sql : {"INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES ($1, $2, $3, $4, CURRENT_TIMESTAMP);",
                          "insert into t values (1)", "SELECT abalance FROM pgbench_accounts WHERE aid = $1;",
                          "UPDATE pgbench_accounts SET abalance = abalance + $1 WHERE aid = $2;", "BEGIN", "COMMIT",
                          "END", "SELECT 1", "select intval from t", ""})
    EXPECT_FALSE(may_matter(sql, true)) << sql;
  // INTO and SELECT pass together in either order, anywhere in the text.
  EXPECT_TRUE(may_matter("INSERT INTO t SELECT 1", true));
  EXPECT_TRUE(may_matter("select 1; insert into t values (1)", true));
  EXPECT_FALSE(may_matter("selec 1 into t", true));
  EXPECT_FALSE(may_matter("select 1 int t", true));
}

TEST(ShapePrefilter, KeywordAtTheEndOfAView) {
  const std::string buffer = "select 1 into t";
  EXPECT_FALSE(may_matter(std::string_view(buffer).substr(0, 12), true));  // "select 1 int"
  EXPECT_TRUE(may_matter(std::string_view(buffer).substr(0, 13), true));
}

// Everything the classifier reports in shape mode — changes, targets, search_path, unresolved,
// and transaction control but BEGIN / COMMIT / ROLLBACK — must pass may_matter(…, true).
TEST(ShapePrefilter, SoundForEverythingShapeModeReports) {
  const char* texts[] = {
      "CREATE TABLE t (a int)", "CREATE UNLOGGED TABLE t (a int)", "CREATE TABLE p1 PARTITION OF p DEFAULT",
      "CREATE TABLE t (LIKE u)", "CREATE TABLE t () INHERITS (u)", "CREATE FOREIGN TABLE f (a int) SERVER s",
      "CREATE TABLE t AS SELECT 1", "CREATE MATERIALIZED VIEW m AS SELECT 1", "SELECT 1 INTO t",
      "WITH x AS (SELECT 1) SELECT * INTO t FROM x", "EXPLAIN ANALYZE SELECT 1 INTO t",
      "CREATE SCHEMA s CREATE TABLE t (a int)", "REFRESH MATERIALIZED VIEW m", "ALTER TABLE t ADD COLUMN c int",
      "ALTER TABLE t RENAME COLUMN a TO b", "ALTER TABLE t RENAME TO u", "ALTER TABLE t SET SCHEMA s",
      "PREPARE TRANSACTION 'g'", "COMMIT PREPARED 'g'", "ROLLBACK PREPARED 'g'", "SAVEPOINT s", "RELEASE s",
      "ROLLBACK TO s", "SELECT 1 INTO t UNION SELECT 2",
  };
  for (const char* sql : texts) {
    const Facts f = classify_uncached(sql, true, true);
    bool reports = f.changes_shape() || f.destroys() || f.unresolved() || f.touches_search_path();
    for (const Statement& s : f.statements)
      reports = reports || (s.txn != TxnControl::none && s.txn != TxnControl::begin &&
                            s.txn != TxnControl::commit && s.txn != TxnControl::rollback);
    EXPECT_TRUE(reports) << "the classifier reports nothing for " << sql;
    EXPECT_TRUE(may_matter(sql, true)) << sql;
  }
}

TEST(ShapeClassifier, ModesAreCachedApart) {
  Classifier c;
  auto plain = c.classify("CREATE TABLE t (a int); DROP TABLE u");
  auto shape = c.classify("CREATE TABLE t (a int); DROP TABLE u", true, true);
  ASSERT_NE(plain, nullptr);
  ASSERT_NE(shape, nullptr);
  EXPECT_NE(plain.get(), shape.get());
  EXPECT_FALSE(plain->changes_shape());
  EXPECT_TRUE(shape->changes_shape());
  auto shape_off = c.classify("CREATE TABLE t (a int); DROP TABLE u", false, true);
  ASSERT_NE(shape_off, nullptr);
  EXPECT_NE(shape_off.get(), shape.get());
  EXPECT_TRUE(shape_off->changes_shape());
  auto plain_off = c.classify("CREATE TABLE t (a int); DROP TABLE u", false, false);
  EXPECT_NE(plain_off.get(), plain.get());
  EXPECT_FALSE(plain_off->changes_shape());
  EXPECT_EQ(c.stats().parsed, 4u);
  // Each mode hits its own entry.
  EXPECT_EQ(c.classify("CREATE TABLE t (a int); DROP TABLE u", true, true).get(), shape.get());
  EXPECT_EQ(c.classify("CREATE TABLE t (a int); DROP TABLE u").get(), plain.get());
  EXPECT_EQ(c.classify("CREATE TABLE t (a int); DROP TABLE u", false, true).get(), shape_off.get());
  EXPECT_EQ(c.stats().cache_hit, 3u);
  EXPECT_EQ(c.stats().parsed, 4u);
}

TEST(ShapeClassifier, PrefilterDependsOnTheMode) {
  Classifier c;
  EXPECT_EQ(c.classify("CREATE TABLE t (a int)"), nullptr);
  auto f = c.classify("CREATE TABLE t (a int)", true, true);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(changes_of(*f), std::vector{create("", "t")});
  EXPECT_EQ(c.classify("INSERT INTO t VALUES (1)", true, true), nullptr);
  const auto s = c.stats();
  EXPECT_EQ(s.prefiltered, 2u);
  EXPECT_EQ(s.parsed, 1u);
}

// A text that itself begins with a NUL byte must not share a key with a flagged one: the flagged
// key of "DROP TABLE a" in a session with standard_conforming_strings off is a NUL, a flag byte
// and the text, which such a text could spell out.
TEST(ShapeClassifier, TextsBeginningWithNulDoNotCollideWithFlaggedKeys) {
  Classifier c;
  for (char flag : {'0', '1', '2', '3'}) {
    const std::string crafted = std::string(1, '\0') + flag + "DROP TABLE a";
    auto empty = c.classify(crafted);  // classified up to the first NUL: nothing
    ASSERT_NE(empty, nullptr);
    EXPECT_FALSE(empty->destroys());
  }
  for (bool scs : {true, false})
    for (bool shape : {true, false}) {
      auto f = c.classify("DROP TABLE a", scs, shape);
      ASSERT_NE(f, nullptr);
      EXPECT_TRUE(f->destroys()) << scs << shape;
    }
}

}  // namespace
}  // namespace predrop::parser
