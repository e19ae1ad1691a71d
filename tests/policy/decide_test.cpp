// Config::decide: the first rule whose globs and kinds match wins; otherwise the default.
#include "test_support.hpp"

namespace predrop::policy {
namespace {

constexpr auto kDropTable = DestroyKind::drop_table;
constexpr auto kTruncate = DestroyKind::truncate;
constexpr auto kAlterTable = DestroyKind::alter_table;

TEST(Glob, StarAndQuestionMark) {
  auto c = test::load_ok(R"(
rules:
  - {table: "tmp_*", action: skip}
  - {table: "log_??", action: skip}
  - {table: "*_bak*", action: skip}
  - {table: "exact", action: skip}
)");
  auto skipped = [&](std::string_view table) { return c->decide("db", "public", table, kDropTable).action == Action::skip; };
  EXPECT_TRUE(skipped("tmp_"));
  EXPECT_TRUE(skipped("tmp_x"));
  EXPECT_FALSE(skipped("tmp"));
  EXPECT_FALSE(skipped("xtmp_1"));
  EXPECT_TRUE(skipped("log_01"));
  EXPECT_FALSE(skipped("log_1"));
  EXPECT_FALSE(skipped("log_001"));
  EXPECT_TRUE(skipped("orders_bak"));
  EXPECT_TRUE(skipped("orders_bak_2024"));
  EXPECT_TRUE(skipped("exact"));
  EXPECT_FALSE(skipped("Exact"));   // names are compared as the server folds them: case matters
  EXPECT_FALSE(skipped("exactly"));
}

TEST(Decide, FirstMatchingRuleWins) {
  auto c = test::load_ok(R"(
rules:
  - {database: prod, table: "audit_*", action: snapshot, on_failure: closed}
  - {database: "prod*", action: skip}
  - {database: "*", on_failure: closed}
default: {action: skip, on_failure: open}
)");
  auto d = c->decide("prod", "public", "audit_log", kDropTable);
  EXPECT_EQ(d.rule_index, 0);
  EXPECT_EQ(d.action, Action::snapshot);
  EXPECT_EQ(d.on_failure, OnFailure::closed);

  d = c->decide("prod", "public", "orders", kDropTable);   // rule 0's table glob fails; rule 1 matches
  EXPECT_EQ(d.rule_index, 1);
  EXPECT_EQ(d.action, Action::skip);

  d = c->decide("prod_eu", "public", "audit_log", kDropTable);   // rule 0's database is exact
  EXPECT_EQ(d.rule_index, 1);

  d = c->decide("staging", "s", "t", kDropTable);
  EXPECT_EQ(d.rule_index, 2);
  EXPECT_EQ(d.action, Action::snapshot);   // the rule's own default, not the config's default
  EXPECT_EQ(d.on_failure, OnFailure::closed);
}

TEST(Decide, KindsRestrictARule) {
  auto c = test::load_ok(R"(
rules:
  - {kinds: [truncate], action: skip}
  - {schema: "scratch", kinds: [drop_table, alter_table], action: skip, on_failure: closed}
)");
  EXPECT_EQ(c->decide("d", "public", "t", kTruncate).rule_index, 0);
  auto d = c->decide("d", "public", "t", kDropTable);
  EXPECT_EQ(d.rule_index, -1);
  EXPECT_EQ(d.action, Action::snapshot);
  EXPECT_EQ(c->decide("d", "scratch", "t", kAlterTable).rule_index, 1);
  EXPECT_EQ(c->decide("d", "scratch", "t", DestroyKind::drop_view).rule_index, -1);
}

TEST(Decide, DefaultRuleWhenNothingMatches) {
  auto c = test::load_ok("rules:\n  - {schema: private}\ndefault: {action: skip, on_failure: closed}\n");
  auto d = c->decide("d", "public", "t", kDropTable);
  EXPECT_EQ(d.rule_index, -1);
  EXPECT_EQ(d.action, Action::skip);
  EXPECT_EQ(d.on_failure, OnFailure::closed);
}

TEST(Decide, NoRulesMeansSnapshotEverythingFailOpen) {
  const Config c;
  auto d = c.decide("d", "s", "t", kDropTable);
  EXPECT_EQ(d.rule_index, -1);
  EXPECT_EQ(d.action, Action::snapshot);
  EXPECT_EQ(d.on_failure, OnFailure::open);
}

TEST(Decide, EmptySchemaMatchesOnlyStar) {
  auto c = test::load_ok("rules:\n  - {schema: \"?*\", action: skip}\n");
  EXPECT_EQ(c->decide("d", "", "t", kDropTable).rule_index, -1);
  EXPECT_EQ(c->decide("d", "s", "t", kDropTable).rule_index, 0);
}

}  // namespace
}  // namespace predrop::policy
