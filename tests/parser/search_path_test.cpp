// split_search_path / parse_search_path and SearchPathTracker against the server's rules.
#include "parser/parser.hpp"

#include <gtest/gtest.h>

namespace predrop::parser {
namespace {

using V = std::vector<std::string>;

TEST(SplitSearchPath, ServerTokenRules) {
  EXPECT_EQ(split_search_path("a, \"B\", $user"), (V{"a", "B", "$user"}));
  EXPECT_EQ(split_search_path("\"$user\", public"), (V{"$user", "public"}));
  EXPECT_EQ(split_search_path("  Foo ,BAR  "), (V{"foo", "bar"}));
  EXPECT_EQ(split_search_path("\"a,b\",c"), (V{"a,b", "c"}));
  EXPECT_EQ(split_search_path("\"x\"\"y\""), (V{"x\"y"}));
  EXPECT_EQ(split_search_path("\"My Schema\", pg_temp"), (V{"My Schema", "pg_temp"}));
  EXPECT_EQ(split_search_path("\xC3\x89t\xC3\xA9"), (V{"\xC3\x89t\xC3\xA9"}));  // only ASCII folds
  EXPECT_EQ(split_search_path(""), V{});
  EXPECT_EQ(split_search_path("   "), V{});
  EXPECT_EQ(split_search_path("\"\""), V{""});
}

TEST(SplitSearchPath, MalformedValuesAreRejected) {
  EXPECT_EQ(parse_search_path("a,,b"), std::nullopt);
  EXPECT_EQ(parse_search_path("a,"), std::nullopt);
  EXPECT_EQ(parse_search_path(",a"), std::nullopt);
  EXPECT_EQ(parse_search_path("\"unterminated"), std::nullopt);
  EXPECT_EQ(parse_search_path("a b"), std::nullopt);
  EXPECT_EQ(parse_search_path("\"a\"b"), std::nullopt);
  EXPECT_EQ(split_search_path("a,,b"), V{});
}

TEST(SplitSearchPath, LongNamesAreTruncatedOnACharacterBoundary) {
  const std::string long_ascii(70, 'a');
  EXPECT_EQ(split_search_path(long_ascii), (V{std::string(63, 'a')}));
  std::string accents;
  for (int i = 0; i < 40; ++i) accents += "\xC3\xA9";  // 80 bytes of 2-byte characters
  const auto got = split_search_path("\"" + accents + "\"");
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].size(), 62u);
}

SettingChange set(V schemas) { return {SettingChange::Scope::session, std::move(schemas), false}; }
SettingChange set_local(V schemas) { return {SettingChange::Scope::local, std::move(schemas), false}; }
SettingChange reset() { return {SettingChange::Scope::reset, {}, true}; }

TEST(SearchPathTracker, StartsAtInitialAndSubstitutesUser) {
  SearchPathTracker t;
  EXPECT_EQ(t.current(), (V{"$user", "public"}));
  EXPECT_EQ(t.effective("alice"), (V{"alice", "public"}));
  SearchPathTracker custom({"pg_temp", "app", "$user", "app"});
  EXPECT_EQ(custom.effective("bob"), (V{"app", "bob"}));  // pg_temp dropped, duplicate skipped
  EXPECT_EQ(custom.effective(""), (V{"app"}));
}

TEST(SearchPathTracker, SessionSetOutsideBlockIsImmediate) {
  SearchPathTracker t;
  t.apply(set({"a", "B"}), false);
  EXPECT_EQ(t.current(), (V{"a", "B"}));
  t.end_transaction(false);  // an implicit transaction ending changes nothing already applied
  EXPECT_EQ(t.current(), (V{"a", "B"}));
  t.apply(reset(), false);
  EXPECT_EQ(t.current(), (V{"$user", "public"}));
}

TEST(SearchPathTracker, SetInBlockKeptByCommitUndoneByRollback) {
  SearchPathTracker t;
  t.apply(set({"a"}), true);
  EXPECT_EQ(t.current(), V{"a"});
  t.end_transaction(false);
  EXPECT_EQ(t.current(), (V{"$user", "public"}));
  t.apply(set({"b"}), true);
  t.end_transaction(true);
  EXPECT_EQ(t.current(), V{"b"});
}

TEST(SearchPathTracker, SetLocalLastsUntilTransactionEnd) {
  SearchPathTracker t;
  t.apply(set({"s"}), false);
  t.apply(set_local({"l"}), true);
  EXPECT_EQ(t.current(), V{"l"});
  t.end_transaction(true);
  EXPECT_EQ(t.current(), V{"s"});
  t.apply(set_local({"l"}), false);  // outside a block: no lasting effect
  EXPECT_EQ(t.current(), V{"s"});
}

TEST(SearchPathTracker, SetAfterSetLocalWinsAtCommit) {
  SearchPathTracker t;
  t.apply(set_local({"l"}), true);
  t.apply(set({"x"}), true);
  EXPECT_EQ(t.current(), V{"x"});
  t.end_transaction(true);
  EXPECT_EQ(t.current(), V{"x"});
}

TEST(SearchPathTracker, SetLocalAfterSetKeepsSetAtCommit) {
  SearchPathTracker t;
  t.apply(set({"x"}), true);
  t.apply(set_local({"l"}), true);
  EXPECT_EQ(t.current(), V{"l"});
  t.end_transaction(true);
  EXPECT_EQ(t.current(), V{"x"});
}

TEST(SearchPathTracker, ResetInBlockIsTransactional) {
  SearchPathTracker t({"init"});
  t.apply(set({"a"}), false);
  t.apply(reset(), true);
  EXPECT_EQ(t.current(), V{"init"});
  t.end_transaction(false);
  EXPECT_EQ(t.current(), V{"a"});
  t.apply(reset(), true);
  t.end_transaction(true);
  EXPECT_EQ(t.current(), V{"init"});
}

TEST(SearchPathTracker, SetLocalToDefaultUsesInitialValue) {
  SearchPathTracker t({"init"});
  t.apply(set({"a"}), false);
  t.apply(SettingChange{SettingChange::Scope::local, {}, true}, true);
  EXPECT_EQ(t.current(), V{"init"});
  t.end_transaction(true);
  EXPECT_EQ(t.current(), V{"a"});
}

TEST(SearchPathTracker, RollbackToSavepointUndoesLaterSets) {
  SearchPathTracker t;
  t.apply(set({"a"}), true);
  t.savepoint("s1");
  t.apply(set({"b"}), true);
  t.apply(set_local({"c"}), true);
  EXPECT_EQ(t.current(), V{"c"});
  t.rollback_to_savepoint("s1");
  EXPECT_EQ(t.current(), V{"a"});
  t.apply(set({"d"}), true);
  t.rollback_to_savepoint("s1");  // the savepoint survives ROLLBACK TO
  EXPECT_EQ(t.current(), V{"a"});
  t.rollback_to_savepoint("nope");  // unknown: the server rejects it, nothing changes
  EXPECT_EQ(t.current(), V{"a"});
  t.end_transaction(true);
  EXPECT_EQ(t.current(), V{"a"});
}

TEST(SearchPathTracker, ReleaseKeepsValuesAndForgetsSavepoint) {
  SearchPathTracker t;
  t.savepoint("s1");
  t.apply(set({"b"}), true);
  t.release_savepoint("s1");
  EXPECT_EQ(t.current(), V{"b"});
  t.rollback_to_savepoint("s1");  // released: unknown now
  EXPECT_EQ(t.current(), V{"b"});
  t.end_transaction(false);
  EXPECT_EQ(t.current(), (V{"$user", "public"}));
}

TEST(SearchPathTracker, NestedSavepointsWithRepeatedNames) {
  SearchPathTracker t;
  t.savepoint("s");
  t.apply(set({"one"}), true);
  t.savepoint("s");
  t.apply(set({"two"}), true);
  t.rollback_to_savepoint("s");  // the most recent "s"
  EXPECT_EQ(t.current(), V{"one"});
  t.release_savepoint("s");
  t.rollback_to_savepoint("s");  // the outer one
  EXPECT_EQ(t.current(), (V{"$user", "public"}));
}

// "$user" names the current user: GetUserId() on the server, which SET ROLE and SET SESSION
// AUTHORIZATION move with the same GUC rules as search_path.
SettingChange role(std::string name, SettingChange::Scope scope = SettingChange::Scope::session) {
  return {scope, {std::move(name)}, false};
}

TEST(SearchPathTracker, SetRoleMovesUserAndResetRoleBringsBackTheLoginUser) {
  SearchPathTracker t;
  t.apply_role(role("owner"), false);
  EXPECT_EQ(t.effective("alice"), (V{"owner", "public"}));
  EXPECT_EQ(t.current(), (V{"$user", "public"})) << "the path itself did not change";
  EXPECT_EQ(t.current_for_role(), (V{"owner", "public"}));
  t.apply_role(role("none"), false);
  EXPECT_EQ(t.effective("alice"), (V{"alice", "public"}));
  EXPECT_EQ(t.current_for_role(), (V{"$user", "public"}));
  t.apply_role(role("owner"), false);
  t.apply_role(reset(), false);
  EXPECT_EQ(t.effective("alice"), (V{"alice", "public"}));
}

TEST(SearchPathTracker, SetRoleFollowsTransactionsAndSavepoints) {
  SearchPathTracker t;
  t.apply_role(role("a"), true);
  t.end_transaction(false);
  EXPECT_EQ(t.effective("u"), (V{"u", "public"})) << "ROLLBACK undid SET ROLE";
  t.apply_role(role("a", SettingChange::Scope::local), true);
  EXPECT_EQ(t.effective("u"), (V{"a", "public"}));
  t.end_transaction(true);
  EXPECT_EQ(t.effective("u"), (V{"u", "public"})) << "SET LOCAL ROLE ended with its transaction";
  t.apply_role(role("a"), true);
  t.savepoint("s");
  t.apply_role(role("b"), true);
  t.apply(set({"x", "$user"}), true);
  EXPECT_EQ(t.effective("u"), (V{"x", "b"}));
  t.rollback_to_savepoint("s");
  EXPECT_EQ(t.effective("u"), (V{"a", "public"})) << "ROLLBACK TO undid both the role and the path";
  t.end_transaction(true);
  EXPECT_EQ(t.effective("u"), (V{"a", "public"}));
}

TEST(SearchPathTracker, SessionAuthorizationIsTheUserWhenNoRoleIsSet) {
  SearchPathTracker t;
  t.apply_session_authorization(role("carol"), false);
  t.apply_role(role("none"), false);
  EXPECT_EQ(t.effective("alice"), (V{"carol", "public"}));
  t.apply_role(role("r"), false);
  EXPECT_EQ(t.effective("alice"), (V{"r", "public"}));
  t.apply_role(role("none"), false);
  EXPECT_EQ(t.effective("alice"), (V{"carol", "public"})) << "SET ROLE NONE: back to the session user";
  t.apply_session_authorization(reset(), false);
  EXPECT_EQ(t.effective("alice"), (V{"alice", "public"}));
}

TEST(SearchPathTracker, AStartupRoleIsTheUserUntilReset) {
  SearchPathTracker t({"$user", "public"}, "app_owner");
  EXPECT_EQ(t.effective("alice"), (V{"app_owner", "public"}));
  t.apply_role(role("none"), false);
  EXPECT_EQ(t.effective("alice"), (V{"alice", "public"}));
  t.apply_role(reset(), false);
  EXPECT_EQ(t.effective("alice"), (V{"app_owner", "public"})) << "RESET ROLE goes back to the startup's role";
  EXPECT_EQ(SearchPathTracker({"$user"}, "none").effective("alice"), V{"alice"});
}

}  // namespace
}  // namespace predrop::parser
