// The transaction tracker (proxy/transaction_tracker.hpp) alone: statements as the classifier
// reports them, fed as the decoder feeds them when the server completes each.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "parser/parser.hpp"
#include "proxy/transaction_tracker.hpp"

namespace {

using predrop::parser::Classifier;
using predrop::parser::SearchPathTracker;
using predrop::parser::SettingChange;
using predrop::proxy::HeldTable;
using predrop::proxy::TransactionTracker;

class TrackerFixture : public ::testing::Test {
 protected:
  TrackerFixture() { t.enable(true); }
  // Every statement of `sql`, completed by the server in order.
  void run(const std::string& sql, const std::vector<HeldTable>* held = nullptr) {
    auto facts = classifier.classify(sql, true, true);
    for (const auto& st : facts->statements) t.completed(st, facts, held, path);
  }
  // Commits the open transaction; the before its one committed change completes ("" for none).
  std::string commit_one_before() {
    t.ended(true);
    auto o = t.take_shape_outcomes();
    EXPECT_EQ(o.committed.size(), 1u);
    return o.committed.empty() ? "<none committed>" : o.committed[0].before_id;
  }
  std::vector<std::string> committed_names() {
    std::vector<std::string> names;
    for (const auto& c : t.take_shape_outcomes().committed) names.push_back(c.change.relation.name);
    return names;
  }
  Classifier classifier{64};
  SearchPathTracker path;
  TransactionTracker t;
};

TEST_F(TrackerFixture, CommittedChangesReachTheOutcomesAndRolledBackOnesDoNot) {
  run("CREATE TABLE a (x int)");
  t.ended(true);
  EXPECT_EQ(committed_names(), std::vector<std::string>{"a"});
  run("CREATE TABLE b (x int)");
  t.ended(false);
  EXPECT_FALSE(t.has_shape_outcomes());
  run("CREATE TABLE c (x int)");
  t.ended(true);
  EXPECT_EQ(committed_names(), std::vector<std::string>{"c"});
}

TEST_F(TrackerFixture, RollbackToUndoesWhatFollowedItsSavepointAndReleaseKeepsIt) {
  run("CREATE TABLE a (x int)");
  run("SAVEPOINT s");
  run("CREATE TABLE b (x int)");
  run("ROLLBACK TO SAVEPOINT s");
  run("CREATE TABLE c (x int)");
  run("SAVEPOINT r");
  run("CREATE TABLE d (x int)");
  run("RELEASE SAVEPOINT r");
  t.ended(true);
  EXPECT_EQ(committed_names(), (std::vector<std::string>{"a", "c", "d"}));
}

TEST_F(TrackerFixture, APreparedTransactionWaitsForItsGidWhereverItEnds) {
  run("CREATE TABLE a (x int)");
  run("PREPARE TRANSACTION 'g1'");
  EXPECT_EQ(t.take_prepared_gid(), std::optional<std::string>("g1"));
  EXPECT_FALSE(t.take_prepared_gid().has_value());
  auto o = t.take_shape_outcomes();
  ASSERT_EQ(o.prepared.size(), 1u);
  EXPECT_EQ(o.prepared[0].first, "g1");
  ASSERT_EQ(o.prepared[0].second.size(), 1u);
  EXPECT_EQ(o.prepared[0].second[0].change.relation.name, "a");
  EXPECT_TRUE(o.committed.empty());
  // Its back-to-idle commits nothing more: the prepared changes left the open transaction.
  t.ended(true);
  EXPECT_FALSE(t.has_shape_outcomes());
  run("ROLLBACK PREPARED 'g1'");
  run("COMMIT PREPARED 'g2'");
  o = t.take_shape_outcomes();
  EXPECT_EQ(o.finished_prepared,
            (std::vector<std::pair<std::string, bool>>{{"g1", false}, {"g2", true}}));
}

TEST_F(TrackerFixture, ARecreateCompletesTheBeforeItsTransactionsHeldDropWrote) {
  std::vector<HeldTable> held{{"public", "t", 4242, "before-id"}};
  run("DROP TABLE t", &held);
  run("CREATE TABLE t (x int)");
  run("CREATE TABLE other (x int)");
  t.ended(true);
  auto o = t.take_shape_outcomes();
  ASSERT_EQ(o.committed.size(), 2u);
  EXPECT_EQ(o.committed[0].before_id, "before-id");
  EXPECT_TRUE(o.committed[1].before_id.empty());
  // The next transaction does not remember this one's drops.
  run("CREATE TABLE t (x int)");
  EXPECT_EQ(commit_one_before(), "");
}

// A worker's autocommit recreate: DROP in one transaction, CREATE in the next. The CREATE names the
// DROP's before, once: a later CREATE of the name recreates whatever dropped it since, which the
// store finds by name.
TEST_F(TrackerFixture, ARecreateCompletesTheBeforeOfTheSessionsEarlierDrop) {
  std::vector<HeldTable> held{{"public", "t", 4242, "before-id"}};
  run("DROP TABLE t", &held);
  t.ended(true);
  t.ended(true);
  run("CREATE TABLE t (x int)");
  EXPECT_EQ(commit_one_before(), "before-id");
  run("CREATE TABLE t (x int)");
  EXPECT_EQ(commit_one_before(), "");
}

TEST_F(TrackerFixture, ARolledBackDropOrRecreateLeavesTheEarlierDropToRecreate) {
  std::vector<HeldTable> held{{"public", "t", 4242, "rolled-back"}};
  run("DROP TABLE t", &held);
  t.ended(false);
  run("CREATE TABLE t (x int)");
  EXPECT_EQ(commit_one_before(), "");

  std::vector<HeldTable> kept{{"public", "u", 4243, "kept"}};
  run("DROP TABLE u", &kept);
  t.ended(true);
  run("CREATE TABLE u (x int)");
  t.ended(false);
  run("CREATE TABLE u (x int)");
  EXPECT_EQ(commit_one_before(), "kept");
}

// Unqualified, a CREATE recreates only a table of a schema on the session's path (public here).
TEST_F(TrackerFixture, AnUnqualifiedRecreateLooksOnlyInTheSessionsPath) {
  std::vector<HeldTable> held{{"elsewhere", "t", 4242, "elsewhere-id"}};
  run("DROP TABLE elsewhere.t", &held);
  t.ended(true);
  run("CREATE TABLE t (x int)");
  EXPECT_EQ(commit_one_before(), "");
  run("CREATE TABLE elsewhere.t (x int)");
  EXPECT_EQ(commit_one_before(), "elsewhere-id");
}

// "$user" on the path is the session user's schema: an unqualified CREATE recreates a table dropped
// there (the default path is "$user", public).
TEST_F(TrackerFixture, AnUnqualifiedRecreateFindsTheUsersSchemaOnThePath) {
  std::vector<HeldTable> held{{"ingest", "t", 4242, "ingest-id"}};
  run("DROP TABLE ingest.t", &held);
  t.ended(true);
  run("CREATE TABLE t (x int)");
  EXPECT_EQ(commit_one_before(), "") << "no user: \"$user\" names no schema";
  run("DROP TABLE ingest.t", &held);
  t.ended(true);
  t.set_user("ingest");
  run("CREATE TABLE t (x int)");
  EXPECT_EQ(commit_one_before(), "ingest-id");
}

// After SET ROLE, "$user" is that role's schema, not the login user's: a recreate finds the DROP
// made there.
TEST_F(TrackerFixture, AnUnqualifiedRecreateAfterSetRoleFindsTheRolesSchema) {
  t.set_user("login");
  std::vector<HeldTable> held{{"owner", "t", 4242, "owner-id"}};
  run("DROP TABLE owner.t", &held);
  t.ended(true);
  path.apply_role(SettingChange{SettingChange::Scope::session, {"owner"}, false}, false);
  run("CREATE TABLE t (x int)");
  EXPECT_EQ(commit_one_before(), "owner-id");
}

// ROLLBACK TO undoes a CREATE that recreated this transaction's DROP: the next CREATE recreates it.
// A DROP it undoes is not remembered past the transaction.
TEST_F(TrackerFixture, RollbackToGivesTheDropBackToTheNextRecreate) {
  std::vector<HeldTable> held{{"public", "t", 4242, "before-id"}};
  run("DROP TABLE t", &held);
  run("SAVEPOINT s");
  run("CREATE TABLE t (x int)");
  run("ROLLBACK TO SAVEPOINT s");
  run("CREATE TABLE t (x int)");
  EXPECT_EQ(commit_one_before(), "before-id");

  std::vector<HeldTable> undone{{"public", "u", 4243, "undone"}};
  run("SAVEPOINT s");
  run("DROP TABLE u", &undone);
  run("ROLLBACK TO SAVEPOINT s");
  t.ended(true);
  run("CREATE TABLE u (x int)");
  EXPECT_EQ(commit_one_before(), "");
}

TEST_F(TrackerFixture, AnAlterTheHoldSnapshottedIsFollowedByOid) {
  std::vector<HeldTable> held{{"public", "t", 4242, "before-id"}};
  run("ALTER TABLE t ADD COLUMN y int", &held);
  t.ended(true);
  auto o = t.take_shape_outcomes();
  ASSERT_EQ(o.committed.size(), 1u);
  EXPECT_EQ(o.committed[0].oid, 4242u);
  EXPECT_EQ(o.committed[0].before_id, "before-id");
}

TEST_F(TrackerFixture, PastTheCapChangesAreCountedNotKept) {
  auto facts = classifier.classify("CREATE TABLE a (x int)", true, true);
  for (size_t i = 0; i < TransactionTracker::kMaxTransactionChanges + 3; ++i)
    t.completed(facts->statements[0], facts, nullptr, path);
  t.ended(true);
  EXPECT_EQ(t.take_shape_outcomes().committed.size(), TransactionTracker::kMaxTransactionChanges);
  EXPECT_EQ(t.changes_dropped(), 3u);
}

}  // namespace
