// Every class of mistake is an error with the file, line and column of the offending text,
// and all of them are reported in one run.
#include "test_support.hpp"

namespace predrop::policy {
namespace {

using test::load_errors;

// The one error of a text that must have exactly one, with its place and words.
void expect_single(std::string_view yaml, int line, int column, const std::string& words) {
  auto errors = load_errors(yaml);
  ASSERT_EQ(errors.size(), 1u) << test::errors_text(errors);
  EXPECT_EQ(errors[0].file, "test.yaml");
  EXPECT_EQ(errors[0].line, line) << errors[0].to_string();
  EXPECT_EQ(errors[0].column, column) << errors[0].to_string();
  EXPECT_NE(errors[0].message.find(words), std::string::npos) << errors[0].to_string();
}

TEST(LoadErrors, YamlSyntaxHasPosition) {
  expect_single("listen: \"127.0.0.1:1\"\nlimits: [1,\n", 3, 1, "YAML syntax");
}

TEST(LoadErrors, TlsVersionRangeMustNotBeEmpty) {
  expect_single("tls:\n  min_version: \"1.3\"\n  max_version: \"1.2\"\n", 3, 16,
                "tls.min_version (1.3) is above tls.max_version (1.2)");
  expect_single("upstream_tls:\n  max_version: \"1.2\"\n  min_version: \"1.3\"\n", 2, 16,
                "upstream_tls.min_version (1.3) is above upstream_tls.max_version (1.2)");
}

TEST(LoadErrors, TlsBelowOnePointTwoIsNotAChoice) {
  expect_single("tls:\n  min_version: \"1.1\"\n", 2, 16, "1.2");
  expect_single("upstream_tls:\n  max_version: \"1.0\"\n", 2, 16, "1.3");
}

TEST(LoadErrors, TopLevelMustBeMapping) {
  expect_single("- listen\n", 1, 1, "expected a mapping of sections");
}

TEST(LoadErrors, UnknownTopLevelKeySuggestsTheRealOne) {
  expect_single("listen: \"h:1\"\nupstrem: \"h:2\"\n", 2, 1, "unknown key 'upstrem' (did you mean 'upstream'?)");
}

TEST(LoadErrors, UnknownSectionKeySuggestsWithinTheSection) {
  expect_single("limits:\n  max_client: 5\n", 2, 3, "unknown key 'max_client' in limits (did you mean 'max_clients'?)");
  expect_single("snapshots:\n  profile:\n    max_column: 5\n", 3, 5,
                "in snapshots.profile (did you mean 'max_columns'?)");
}

TEST(LoadErrors, KeyInTheWrongSectionNamesItsHome) {
  expect_single("max_clients: 5\n", 1, 1, "(did you mean 'limits.max_clients'?)");
  expect_single("snapshots:\n  pool_size: 2\n", 2, 3, "(did you mean 'capture.pool_size'?)");
}

TEST(LoadErrors, UnknownKeyWithoutNeighbourHasNoSuggestion) {
  auto errors = load_errors("zzzzzz: 1\n");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].message, "unknown key 'zzzzzz'");
}

TEST(LoadErrors, TypoInRuleKeyIsAnErrorNotAWiderRule) {
  // "tabel" ignored would make the rule match every table: the worst kind of silent failure.
  expect_single("rules:\n  - tabel: \"tmp_*\"\n    action: skip\n", 2, 5,
                "unknown key 'tabel' in rules[0] (did you mean 'table'?)");
}

TEST(LoadErrors, WrongShapes) {
  expect_single("tls: 5\n", 1, 6, "tls: expected a mapping of keys, got a single value");
  expect_single("listen: {host: a}\n", 1, 9, "listen: expected HOST:PORT, got a mapping");
  expect_single("threads: [1, 2]\n", 1, 10, "threads: expected an integer 0..1024, got a list");
  expect_single("snapshots:\n  hash_excluded: col\n", 2, 18, "expected a list of strings like [a, b]");
  expect_single("rules: {table: x}\n", 1, 8, "rules: expected a list of rules");
  expect_single("rules:\n  - snapshot\n", 2, 5, "rules[0]: expected a mapping");
  expect_single("snapshots:\n  hash_excluded: [a, [b]]\n", 2, 22, "snapshots.hash_excluded[1]: expected a string");
}

TEST(LoadErrors, WrongScalarTypes) {
  expect_single("limits:\n  max_clients: lots\n", 2, 16, "expected an integer, got 'lots'");
  expect_single("limits:\n  max_clients: 1.5\n", 2, 16, "expected an integer, got '1.5'");
  expect_single("snapshots:\n  enabled: maybe\n", 2, 12, "expected true or false, got 'maybe'");
  expect_single("threads:\n", 1, 1, "threads: expected an integer 0..1024, got nothing");
}

TEST(LoadErrors, OutOfRange) {
  expect_single("listen: \"127.0.0.1:70000\"\n", 1, 9, "expected HOST:PORT");
  expect_single("upstream: \"db\"\n", 1, 11, "expected HOST:PORT");
  expect_single("limits:\n  startup_timeout_ms: 0\n", 2, 23, "must be between 1 and 3600000, got 0");
  expect_single("limits:\n  drain_timeout_ms: -5\n", 2, 21, "must be between 1 and 3600000, got -5");
  expect_single("snapshots:\n  hold_timeout_ms: 0\n", 2, 20, "snapshots.hold_timeout_ms: must be between 1");
  expect_single("capture:\n  pool_size: 65\n", 2, 14, "capture.pool_size: must be between 1 and 64, got 65");
  expect_single("capture:\n  pool_size: 0\n", 2, 14, "must be between 1 and 64, got 0");
  expect_single("threads: -1\n", 1, 10, "must be between 0 and 1024");
  expect_single("limits:\n  max_message_bytes: 99999999999\n", 2, 22, "must be between 1024 and 1073741824");
}

TEST(LoadErrors, EnumsSuggestTheNearestWord) {
  expect_single("upstream_tls:\n  sslmode: verify_full\n", 2, 12,
                "must be one of disable, prefer, require, verify-ca, verify-full; got 'verify_full' "
                "(did you mean 'verify-full'?)");
  expect_single("tls:\n  min_version: \"1.1\"\n", 2, 16, "must be one of 1.2, 1.3; got '1.1'");
  expect_single("logging:\n  format: jsn\n", 2, 11, "(did you mean 'json'?)");
  expect_single("logging:\n  level: warning\n", 2, 10, "(did you mean 'warn'?)");
  expect_single("default:\n  action: snapshots\n", 2, 11, "(did you mean 'snapshot'?)");
  expect_single("rules:\n  - on_failure: close\n", 2, 17, "rules[0].on_failure: must be one of open, closed");
}

TEST(LoadErrors, KindsAreCheckedOneByOne) {
  expect_single("rules:\n  - kinds: [drop_table, drop_tabel]\n", 2, 25,
                "rules[0].kinds[1]: unknown kind 'drop_tabel' (did you mean 'drop_table'?)");
  expect_single("rules:\n  - kinds: []\n", 2, 12, "rules[0].kinds: must not be empty");
  expect_single("rules:\n  - kinds: drop_table\n", 2, 12, "expected a list of statement kinds like [a, b]");
}

TEST(LoadErrors, GlobSyntax) {
  expect_single("rules:\n  - table: \"tmp_[0-9]\"\n", 2, 12, "rules[0].table: glob contains '['");
  expect_single("rules:\n  - schema: \"\"\n", 2, 13, "rules[0].schema: expected a glob (* and ?), got nothing");
  expect_single("rules:\n  - database: \"a|b\"\n", 2, 15, "only * and ? are wildcards");
}

TEST(LoadErrors, DuplicateKeysAreRefused) {
  expect_single("limits:\n  max_clients: 5\n  max_clients: 6\n", 3, 3,
                "duplicate key 'limits.max_clients' (first set on line 2)");
  expect_single("rules:\n  - table: a\n    table: b\n", 3, 5, "duplicate key 'rules[0].table'");
}

TEST(LoadErrors, StoreTableMustBeAPlainIdentifier) {
  expect_single("store:\n  table: \"x; drop table y\"\n", 2, 10, "expected [schema.]table");
  expect_single("store:\n  table: Public.Snaps\n", 2, 10, "lower-case");
}

TEST(LoadErrors, CrossKeyChecksPointAtTheKeyThatWasSet) {
  test::TempDir dir;
  const std::string cert = dir.write("cert.pem", "x");
  expect_single("tls:\n  cert_file: " + cert + "\n", 2, 14, "tls.cert_file is set but tls.key_file is not");
  expect_single("tls:\n  cert_file: /nonexistent/cert.pem\n  key_file: " + cert + "\n", 2, 14,
                "tls.cert_file: cannot read '/nonexistent/cert.pem'");
  expect_single("limits:\n  max_inspect_bytes: 4096\n  max_message_bytes: 2048\n", 2, 22,
                "must not exceed limits.max_message_bytes (2048)");
  expect_single("capture:\n  conninfo: host=a\n  conninfo_file: /x\n", 3, 18,
                "set either capture.conninfo or capture.conninfo_file, not both");
  expect_single("store:\n  conninfo_file: /nonexistent/secret\n", 2, 18,
                "store.conninfo_file: cannot read '/nonexistent/secret'");
}

TEST(LoadErrors, AllErrorsAreCollectedInDocumentOrder) {
  auto errors = load_errors(
      "lisen: \"h:1\"\n"                 // 1: unknown key
      "limits:\n"
      "  max_clients: 0\n"               // 3: out of range
      "upstream_tls: {sslmode: nope}\n"  // 4: enum
      "rules:\n"
      "  - kinds: [truncat]\n");          // 6: kind
  ASSERT_EQ(errors.size(), 4u) << test::errors_text(errors);
  EXPECT_EQ(errors[0].line, 1);
  EXPECT_EQ(errors[1].line, 3);
  EXPECT_EQ(errors[2].line, 4);
  EXPECT_EQ(errors[3].line, 6);
  EXPECT_NE(errors[3].message.find("did you mean 'truncate'?"), std::string::npos);
}

TEST(LoadErrors, ToStringIsFileLineColumnMessage) {
  auto errors = load_errors("limits:\n  max_clients: 0\n");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].to_string(), "test.yaml:2:16: limits.max_clients: must be between 1 and 1000000, got 0");
  EXPECT_EQ((ConfigError{"environment", 0, 0, "X: bad"}).to_string(), "environment: X: bad");
}

TEST(LoadErrors, MissingFile) {
  auto r = load_file("/nonexistent/predrop.yaml");
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.config, nullptr);
  EXPECT_EQ(r.errors[0].file, "/nonexistent/predrop.yaml");
  EXPECT_NE(r.errors[0].message.find("cannot read"), std::string::npos);
}

TEST(LoadErrors, FileErrorsNameTheFile) {
  test::TempDir dir;
  const std::string path = dir.write("bad.yaml", "\n\nlimits:\n    buffer_bytes: 1\n");
  auto r = load_file(path);
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].to_string(), path + ":4:19: limits.buffer_bytes: must be between 1024 and 16777216, got 1");
}

}  // namespace
}  // namespace predrop::policy
