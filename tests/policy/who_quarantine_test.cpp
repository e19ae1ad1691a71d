// Rules that match who (user, application_name, client_addr), the quarantine action and the
// quarantine.* keys: what decide() answers, what the loader refuses, what describe() and reload show.
#include "test_support.hpp"

namespace predrop::policy {
namespace {

using test::load_errors;
using test::load_ok;

constexpr auto kDropTable = DestroyKind::drop_table;
constexpr auto kDropSchema = DestroyKind::drop_schema;
constexpr auto kTruncate = DestroyKind::truncate;
constexpr auto kAlterTable = DestroyKind::alter_table;
constexpr auto kDropView = DestroyKind::drop_view;

void expect_single(std::string_view yaml, int line, int column, const std::string& words) {
  auto errors = load_errors(yaml);
  ASSERT_EQ(errors.size(), 1u) << test::errors_text(errors);
  EXPECT_EQ(errors[0].file, "test.yaml");
  EXPECT_EQ(errors[0].line, line) << errors[0].to_string();
  EXPECT_EQ(errors[0].column, column) << errors[0].to_string();
  EXPECT_NE(errors[0].message.find(words), std::string::npos) << errors[0].to_string();
}

TEST(DecideWho, EachConditionMatchesItsField) {
  auto c = load_ok(R"(
rules:
  - {user: "etl_*", action: skip}
  - {application_name: psql, action: quarantine}
  - {client_addr: 10.0.0.0/8, action: skip, on_failure: closed}
default: {action: snapshot}
)");
  auto rule = [&](Who who) { return c->decide("db", "public", "t", kDropTable, who).rule_index; };
  EXPECT_EQ(rule({"etl_nightly", "psql", "10.1.1.1"}), 0);   // first match wins
  EXPECT_EQ(rule({"alice", "psql", "10.1.1.1"}), 1);
  EXPECT_EQ(rule({"alice", "worker", "10.1.1.1"}), 2);
  EXPECT_EQ(rule({"alice", "worker", "127.0.0.1"}), -1);
  EXPECT_EQ(rule({"etl", "psql2", "::1"}), -1);              // globs are whole-string
  EXPECT_EQ(c->decide("db", "public", "t", kDropTable, {"alice", "psql", ""}).action, Action::quarantine);
  EXPECT_EQ(c->decide("db", "public", "t", kDropTable, {"alice", "x", "10.0.0.1"}).on_failure, OnFailure::closed);
}

// Where a later DROP ROLE & co. is held for the quarantine (issue 22): wherever a quarantine rule
// could have put a table in quarantine, whoever it names; nowhere else.
TEST(DecideWho, QuarantinesInNamesTheDatabasesAQuarantineRuleCovers) {
  auto c = load_ok(R"(
rules:
  - {database: "prod*", user: etl, action: quarantine}
  - {database: dev, action: skip}
)");
  EXPECT_TRUE(c->quarantines_in("prod"));
  EXPECT_TRUE(c->quarantines_in("prod_eu"));
  EXPECT_FALSE(c->quarantines_in("dev"));
  EXPECT_FALSE(c->quarantines_in("staging"));
  EXPECT_FALSE(load_ok("rules:\n  - {action: snapshot}\n")->quarantines_in("prod"));
}

TEST(DecideWho, ConditionsOfOneRuleAllHold) {
  auto c = load_ok(R"(
rules:
  - {database: prod, schema: app, user: alice, application_name: "psql*", client_addr: "127.0.0.1", action: skip}
)");
  auto skipped = [&](std::string_view db, Who who) {
    return c->decide(db, "app", "t", kDropTable, who).action == Action::skip;
  };
  EXPECT_TRUE(skipped("prod", {"alice", "psql", "127.0.0.1"}));
  EXPECT_TRUE(skipped("prod", {"alice", "psql-15", "::ffff:127.0.0.1"}));
  EXPECT_FALSE(skipped("dev", {"alice", "psql", "127.0.0.1"}));
  EXPECT_FALSE(skipped("prod", {"bob", "psql", "127.0.0.1"}));
  EXPECT_FALSE(skipped("prod", {"alice", "pgadmin", "127.0.0.1"}));
  EXPECT_FALSE(skipped("prod", {"alice", "psql", "127.0.0.2"}));
}

TEST(DecideWho, AnUnknownFieldNeverMatchesACondition) {
  auto c = load_ok(R"(
rules:
  - {user: "*", action: skip}
  - {application_name: "*", action: skip}
  - {client_addr: "0.0.0.0/0", action: skip}
  - {client_addr: "::/0", action: skip}
  - {table: "t", action: quarantine}
)");
  // The 4-argument decide knows nobody: only the rule without who-conditions can match.
  EXPECT_EQ(c->decide("db", "public", "t", kDropTable).rule_index, 4);
  EXPECT_EQ(c->decide("db", "public", "t", kDropTable, Who{}).rule_index, 4);
  EXPECT_EQ(c->decide("db", "public", "t", kDropTable, {"", "", "not-an-address"}).rule_index, 4);
  EXPECT_EQ(c->decide("db", "public", "t", kDropTable, {"u", "", ""}).rule_index, 0);
  EXPECT_EQ(c->decide("db", "public", "t", kDropTable, {"", "app", ""}).rule_index, 1);
  EXPECT_EQ(c->decide("db", "public", "t", kDropTable, {"", "", "192.0.2.1"}).rule_index, 2);
  EXPECT_EQ(c->decide("db", "public", "t", kDropTable, {"", "", "2001:db8::1"}).rule_index, 3);
}

TEST(DecideWho, ClientAddrIpv6AndSlashZero) {
  auto c = load_ok(R"(
rules:
  - {client_addr: "::1", action: skip}
  - {client_addr: "2001:db8::/32", action: quarantine}
  - {client_addr: "0.0.0.0/0", on_failure: closed}
)");
  auto rule = [&](std::string_view addr) { return c->decide("d", "s", "t", kDropTable, {"u", "a", addr}).rule_index; };
  EXPECT_EQ(rule("::1"), 0);
  EXPECT_EQ(rule("2001:db8:1::5"), 1);
  EXPECT_EQ(rule("2001:db9::5"), -1);
  EXPECT_EQ(rule("203.0.113.9"), 2);
  EXPECT_EQ(rule("::ffff:203.0.113.9"), 2);
}

TEST(DecideQuarantine, OnlyDropTableAndDropSchemaAreQuarantined) {
  auto c = load_ok("rules:\n  - {action: quarantine, on_failure: closed}\n");
  EXPECT_EQ(c->decide("d", "s", "t", kDropTable).action, Action::quarantine);
  EXPECT_EQ(c->decide("d", "s", "s", kDropSchema).action, Action::quarantine);
  for (int kind = 0; kind < kKindCount; ++kind) {
    if (static_cast<DestroyKind>(kind) == kDropTable || static_cast<DestroyKind>(kind) == kDropSchema) continue;
    auto d = c->decide("d", "s", "t", static_cast<DestroyKind>(kind));
    EXPECT_EQ(d.action, Action::snapshot) << kind_name(kind);
    EXPECT_EQ(d.rule_index, 0) << kind_name(kind);              // the rule still decided, on_failure with it
    EXPECT_EQ(d.on_failure, OnFailure::closed) << kind_name(kind);
  }
  auto dflt = load_ok("default: {action: quarantine}\n");
  EXPECT_EQ(dflt->decide("d", "s", "t", kDropTable).action, Action::quarantine);
  EXPECT_EQ(dflt->decide("d", "s", "t", kTruncate).action, Action::snapshot);
}

TEST(DecideQuarantine, QuarantineRuleWithMixedKindsQuarantinesTheDrops) {
  auto c = load_ok(R"(
rules:
  - {user: alice, kinds: [drop_table, truncate], action: quarantine}
  - {user: alice, action: skip}
)");
  EXPECT_EQ(c->decide("d", "s", "t", kDropTable, {"alice", "", ""}).action, Action::quarantine);
  EXPECT_EQ(c->decide("d", "s", "t", kTruncate, {"alice", "", ""}).action, Action::snapshot);
  EXPECT_EQ(c->decide("d", "s", "t", kAlterTable, {"alice", "", ""}).action, Action::skip);
  EXPECT_EQ(c->decide("d", "s", "t", kDropView, {"bob", "", ""}).rule_index, -1);
}

TEST(LoadWho, EmptyGlobsAreRefused) {
  expect_single("rules:\n  - {user: \"\", action: skip}\n", 2, 12, "rules[0].user: expected a glob");
  expect_single("rules:\n  - application_name:\n    action: skip\n", 2, 5, "rules[0].application_name: expected a glob");
  expect_single("rules:\n  - {user: \"a[b\"}\n", 2, 12, "rules[0].user: glob");
}

TEST(LoadWho, BadClientAddrIsRefused) {
  expect_single("rules:\n  - {client_addr: 10.0.0.0/33}\n", 2, 19, "rules[0].client_addr: prefix /33 is above 32");
  expect_single("rules:\n  - {client_addr: 10.1.2.3/8}\n", 2, 19, "did you mean 10.0.0.0/8?");
  expect_single("rules:\n  - {client_addr: localhost}\n", 2, 19, "'localhost' is not an IPv4 or IPv6 address");
  expect_single("rules:\n  - {client_addr: \"::1/200\"}\n", 2, 19, "prefix /200 is above 128");
  expect_single("rules:\n  - {client_addr: \"\"}\n", 2, 19, "rules[0].client_addr: expected an address or CIDR");
}

TEST(LoadWho, QuarantineRuleMustNameADropKind) {
  expect_single("rules:\n  - {kinds: [truncate, alter_table], action: quarantine}\n", 2, 13,
                "rules[0]: action quarantine covers only drop_table and drop_schema, but kinds names neither");
  expect_single("rules:\n  - action: quarantine\n    kinds: [drop_view]\n", 3, 12, "kinds names neither");
  load_ok("rules:\n  - {kinds: [drop_schema], action: quarantine}\n");
  load_ok("rules:\n  - {kinds: [truncate], action: snapshot}\n");
  load_ok("rules:\n  - {action: quarantine}\n");   // all kinds: the drops are quarantined, the rest snapshotted
}

TEST(LoadQuarantine, DefaultsFollowTheContract) {
  Config c;
  EXPECT_EQ(c.quarantine_schema, "predrop_quarantine");
  EXPECT_EQ(c.quarantine_retention_s, 604800);
  EXPECT_EQ(c.quarantine_max_bytes, 0u);
  EXPECT_EQ(c.quarantine_max_tables, 0);
  EXPECT_EQ(c.quarantine_purge_interval_s, 60);
  EXPECT_EQ(c.quarantine_lock_timeout_ms, 100);
}

TEST(LoadQuarantine, EveryKeyAndItsFormats) {
  auto c = load_ok(R"(
quarantine:
  schema: trash_2
  retention: 36h
  max_bytes: 10GB
  max_tables: 500
  purge_interval_s: 15
  lock_timeout_ms: 250
)");
  EXPECT_EQ(c->quarantine_schema, "trash_2");
  EXPECT_EQ(c->quarantine_retention_s, 36 * 3600);
  EXPECT_EQ(c->quarantine_max_bytes, 10ull << 30);
  EXPECT_EQ(c->quarantine_max_tables, 500);
  EXPECT_EQ(c->quarantine_purge_interval_s, 15);
  EXPECT_EQ(c->quarantine_lock_timeout_ms, 250);
  auto retention = [](std::string_view text) {
    return load_ok("quarantine: {retention: " + std::string(text) + "}\n")->quarantine_retention_s;
  };
  EXPECT_EQ(retention("7d"), 604800);
  EXPECT_EQ(retention("90m"), 5400);
  EXPECT_EQ(retention("30s"), 30);
  EXPECT_EQ(retention("3600"), 3600);
  auto bytes = [](std::string_view text) {
    return load_ok("quarantine: {max_bytes: \"" + std::string(text) + "\"}\n")->quarantine_max_bytes;
  };
  EXPECT_EQ(bytes("0"), 0u);
  EXPECT_EQ(bytes("1234"), 1234u);
  EXPECT_EQ(bytes("512MB"), 512ull << 20);
  EXPECT_EQ(bytes("64kB"), 64ull << 10);
  EXPECT_EQ(bytes("2 TB"), 2ull << 40);
  EXPECT_EQ(bytes("1gb"), 1ull << 30);
  EXPECT_EQ(bytes("100B"), 100u);
}

TEST(LoadQuarantine, BadValuesAreRefusedWithTheirPlace) {
  expect_single("quarantine:\n  schema: Trash\n", 2, 11, "quarantine.schema: 'Trash' must start with a lower-case letter");
  expect_single("quarantine:\n  schema: \"a-b\"\n", 2, 11, "may hold only a-z, 0-9, _ and $");
  expect_single("quarantine:\n  schema:\n", 2, 3, "quarantine.schema: expected a schema name, got nothing");
  expect_single("quarantine:\n  retention: 7w\n", 2, 14, "quarantine.retention: expected a duration like 7d");
  expect_single("quarantine:\n  retention: 0\n", 2, 14, "quarantine.retention: must be between 1s and 3650d");
  expect_single("quarantine:\n  retention: -5\n", 2, 14, "expected a duration");
  expect_single("quarantine:\n  retention: 99999d\n", 2, 14, "must be between 1s and 3650d");
  expect_single("quarantine:\n  max_bytes: 10XB\n", 2, 14, "quarantine.max_bytes: expected a size like 10GB");
  expect_single("quarantine:\n  max_bytes: 1.5GB\n", 2, 14, "expected a size");
  expect_single("quarantine:\n  max_bytes: 99999999999999TB\n", 2, 14, "expected a size");
  expect_single("quarantine:\n  max_tables: -1\n", 2, 15, "quarantine.max_tables: must be between 0 and");
  expect_single("quarantine:\n  purge_interval_s: 0\n", 2, 21, "quarantine.purge_interval_s: must be between 1 and 86400");
  expect_single("quarantine:\n  lock_timeout_ms: 0\n", 2, 20, "quarantine.lock_timeout_ms: must be between 1 and 60000");
  expect_single("quarantine:\n  retension: 7d\n", 2, 3, "did you mean 'retention'?");
}

TEST(LoadQuarantine, EnvironmentOverridesApply) {
  test::ScopedEnv retention("PREDROP_QUARANTINE_RETENTION", "2d");
  test::ScopedEnv bytes("PREDROP_QUARANTINE_MAX_BYTES", "1MB");
  auto c = load_ok("");
  EXPECT_EQ(c->quarantine_retention_s, 2 * 86400);
  EXPECT_EQ(c->quarantine_max_bytes, 1u << 20);
}

TEST(LoadQuarantine, EveryNewKeyReloadsOnSighup) {
  for (const char* key : {"quarantine.schema", "quarantine.retention", "quarantine.max_bytes", "quarantine.max_tables",
                          "quarantine.purge_interval_s", "quarantine.lock_timeout_ms", "rules[].user",
                          "rules[].application_name", "rules[].client_addr"}) {
    ASSERT_TRUE(reload_behaviour(key)) << key;
    EXPECT_EQ(*reload_behaviour(key), ReloadBehaviour::sighup) << key;
  }
  Config running;
  Config next;
  next.quarantine_schema = "q2";
  next.quarantine_retention_s = 60;
  next.quarantine_max_bytes = 5;
  next.quarantine_max_tables = 6;
  next.quarantine_purge_interval_s = 7;
  next.quarantine_lock_timeout_ms = 8;
  EXPECT_TRUE(keep_restart_keys(next, running).empty());
  EXPECT_EQ(next.quarantine_schema, "q2");
  EXPECT_EQ(next.quarantine_lock_timeout_ms, 8);
}

TEST(LoadQuarantine, DescribeShowsTheKeysAndWhoAndRoundTrips) {
  auto c = load_ok(R"(
quarantine: {schema: trash, retention: 36h, max_bytes: 1GB, max_tables: 9}
rules:
  - {user: "etl_*", application_name: worker, client_addr: "10.0.0.0/8", kinds: [drop_table], action: quarantine}
  - {table: "tmp_*", action: skip}
)");
  const std::string text = describe(*c);
  EXPECT_NE(text.find("quarantine:\n  schema: trash\n  retention: 36h\n  max_bytes: 1073741824\n  max_tables: 9\n"
                      "  purge_interval_s: 60\n  lock_timeout_ms: 100\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("user: etl_*"), std::string::npos) << text;
  EXPECT_NE(text.find("client_addr: 10.0.0.0/8"), std::string::npos) << text;
  EXPECT_NE(text.find("action: quarantine"), std::string::npos) << text;
  auto again = load_string(text, "describe");
  ASSERT_TRUE(again.errors.empty()) << test::errors_text(again.errors) << text;
  EXPECT_EQ(describe(*again.config), text);
  ASSERT_EQ(again.config->rules.size(), 2u);
  EXPECT_EQ(again.config->rules[0].application_name, "worker");
  EXPECT_TRUE(again.config->rules[1].user.empty());   // left out, and not shown as an empty glob
  EXPECT_FALSE(again.config->rules[1].client_net);
  EXPECT_EQ(again.config->quarantine_retention_s, 36 * 3600);
}

TEST(LoadQuarantine, ReloadSwapsWhoRules) {
  test::TempDir dir;
  const std::string path = dir.write("p.yaml", "rules:\n  - {user: alice, action: skip}\n");
  auto first = load_file(path);
  ASSERT_TRUE(first.errors.empty()) << test::errors_text(first.errors);
  PolicyHolder holder(first.config);
  EXPECT_EQ(holder.current()->decide("d", "s", "t", kDropTable, {"alice", "", ""}).action, Action::skip);
  dir.write("p.yaml", "rules:\n  - {user: bob, action: skip}\n  - {client_addr: 127.0.0.1, action: quarantine}\n"
                      "quarantine: {retention: 1h}\n");
  auto r = holder.reload(path);
  ASSERT_TRUE(r.ok) << test::errors_text(r.errors);
  EXPECT_TRUE(r.restart_required.empty());
  EXPECT_EQ(holder.current()->decide("d", "s", "t", kDropTable, {"alice", "", ""}).action, Action::snapshot);
  EXPECT_EQ(holder.current()->decide("d", "s", "t", kDropTable, {"alice", "", "127.0.0.1"}).action, Action::quarantine);
  EXPECT_EQ(holder.current()->decide("d", "s", "t", kDropTable, {"bob", "", "127.0.0.1"}).action, Action::skip);
  EXPECT_EQ(holder.current()->quarantine_retention_s, 3600);
  dir.write("p.yaml", "rules:\n  - {client_addr: 127.0.0.1/40}\n");
  auto bad = holder.reload(path);
  EXPECT_FALSE(bad.ok);
  EXPECT_EQ(holder.current()->quarantine_retention_s, 3600);   // the running config was kept
}

}  // namespace
}  // namespace predrop::policy
