// A complete, valid file maps onto every Config field; an empty one gives the defaults.
#include "test_support.hpp"

namespace predrop::policy {
namespace {

using test::load_ok;

constexpr const char* kFullFile = R"(
listen: "0.0.0.0:7432"
upstream: "db.internal:5433"
admin: "[::1]:9187"
threads: 3
tls:
  min_version: "1.3"
  ciphers: "HIGH:!aNULL"
upstream_tls:
  sslmode: verify-full
  server_name: db.example.com
  min_version: "1.3"
limits:
  max_clients: 50
  max_message_bytes: 1048576
  max_inspect_bytes: 65536
  startup_timeout_ms: 5000
  drain_timeout_ms: 7000
  buffer_bytes: 8192
logging:
  format: json
  level: debug
snapshots:
  enabled: false
  hold_timeout_ms: 1500
  dedup_window_s: 60
  naive_array_split: true
  hash_excluded: [a, b]
  profile:
    max_values: 5
    max_value_chars: 40
    max_columns: 100
capture:
  conninfo: "host=db user=predrop password=capture-secret"
  pool_size: 8
store:
  conninfo: "postgresql://store:store-secret@db/snapshots"
  table: audit.snapshots
  migrate_on_start: no
enrichment:
  identity_sql: "select current_user"
  provenance_sql: |
    select 1
rules:
  - database: "prod_*"
    schema: public
    table: "tmp_?"
    kinds: [drop_table, truncate]
    action: skip
    on_failure: closed
  - table: "*"
default:
  action: skip
  on_failure: closed
)";

TEST(LoadValid, FullFileSetsEveryField) {
  auto c = load_ok(kFullFile);
  EXPECT_EQ(c->listen.host, "0.0.0.0");
  EXPECT_EQ(c->listen.port, 7432);
  EXPECT_EQ(c->upstream.to_string(), "db.internal:5433");
  ASSERT_TRUE(c->admin.has_value());
  EXPECT_EQ(c->admin->host, "::1");
  EXPECT_EQ(c->admin->port, 9187);
  EXPECT_EQ(c->threads, 3);
  EXPECT_EQ(c->tls.min_version, "1.3");
  EXPECT_EQ(c->tls.ciphers, "HIGH:!aNULL");
  EXPECT_EQ(c->upstream_tls.sslmode, "verify-full");
  EXPECT_EQ(c->upstream_tls.server_name, "db.example.com");
  EXPECT_EQ(c->upstream_tls.min_version, "1.3");
  EXPECT_EQ(c->limits.max_clients, 50);
  EXPECT_EQ(c->limits.max_message_bytes, 1048576u);
  EXPECT_EQ(c->limits.max_inspect_bytes, 65536u);
  EXPECT_EQ(c->limits.startup_timeout_ms, 5000);
  EXPECT_EQ(c->limits.drain_timeout_ms, 7000);
  EXPECT_EQ(c->limits.buffer_bytes, 8192);
  EXPECT_EQ(c->logging.format, "json");
  EXPECT_EQ(c->logging.level, "debug");
  EXPECT_FALSE(c->snapshots_enabled);
  EXPECT_EQ(c->hold_timeout_ms, 1500);
  EXPECT_EQ(c->dedup_window_s, 60);
  EXPECT_TRUE(c->naive_array_split);
  EXPECT_EQ(c->hash_excluded, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(c->profile_max_values, 5);
  EXPECT_EQ(c->profile_max_value_chars, 40);
  EXPECT_EQ(c->profile_max_columns, 100);
  EXPECT_EQ(c->capture_conninfo, "host=db user=predrop password=capture-secret");
  EXPECT_EQ(c->capture_pool_size, 8);
  EXPECT_EQ(c->store_conninfo, "postgresql://store:store-secret@db/snapshots");
  EXPECT_EQ(c->store_table, "audit.snapshots");
  EXPECT_FALSE(c->migrate_on_start);
  EXPECT_EQ(c->enrich_identity_sql, "select current_user");
  EXPECT_EQ(c->enrich_provenance_sql, "select 1\n");
  ASSERT_EQ(c->rules.size(), 2u);
  EXPECT_EQ(c->rules[0].database, "prod_*");
  EXPECT_EQ(c->rules[0].schema, "public");
  EXPECT_EQ(c->rules[0].table, "tmp_?");
  EXPECT_EQ(c->rules[0].kinds, (1u << *kind_from_name("drop_table")) | (1u << *kind_from_name("truncate")));
  EXPECT_EQ(c->rules[0].action, Action::skip);
  EXPECT_EQ(c->rules[0].on_failure, OnFailure::closed);
  EXPECT_EQ(c->rules[1].database, "*");
  EXPECT_EQ(c->rules[1].kinds, 0xFFFFFFFFu);
  EXPECT_EQ(c->rules[1].action, Action::snapshot);
  EXPECT_EQ(c->default_rule.action, Action::skip);
  EXPECT_EQ(c->default_rule.on_failure, OnFailure::closed);
}

TEST(LoadValid, EmptyFileAndEmptySectionsGiveDefaults) {
  const Config defaults;
  for (const char* text : {"", "# only a comment\n", "tls:\nlimits:\nrules:\n"}) {
    auto c = load_ok(text);
    EXPECT_EQ(c->listen.to_string(), defaults.listen.to_string()) << text;
    EXPECT_EQ(c->limits.max_clients, defaults.limits.max_clients);
    EXPECT_EQ(c->hold_timeout_ms, defaults.hold_timeout_ms);
    EXPECT_EQ(c->hash_excluded, defaults.hash_excluded);
    EXPECT_TRUE(c->rules.empty());
    EXPECT_FALSE(c->admin.has_value());
  }
}

TEST(LoadValid, BooleansAcceptCommonSpellings) {
  EXPECT_FALSE(load_ok("snapshots: {enabled: off}")->snapshots_enabled);
  EXPECT_FALSE(load_ok("snapshots: {enabled: \"no\"}")->snapshots_enabled);
  EXPECT_TRUE(load_ok("snapshots: {enabled: yes}")->snapshots_enabled);
  EXPECT_TRUE(load_ok("snapshots: {enabled: True}")->snapshots_enabled);
}

TEST(LoadValid, NullAdminMeansNoAdminEndpoint) {
  EXPECT_FALSE(load_ok("admin:\n")->admin.has_value());
  EXPECT_FALSE(load_ok("admin: \"\"\n")->admin.has_value());
}

TEST(LoadValid, AdminPortAloneIsLoopback) {
  auto c = load_ok("admin: 9187\n");
  ASSERT_TRUE(c->admin.has_value());
  EXPECT_EQ(c->admin->to_string(), "127.0.0.1:9187");
  EXPECT_EQ(load_ok("admin: \"0.0.0.0:9187\"\n")->admin->to_string(), "0.0.0.0:9187");
  EXPECT_FALSE(parse_admin_endpoint("0"));
  EXPECT_FALSE(parse_admin_endpoint("65536"));
  EXPECT_FALSE(parse_endpoint("9187")) << "only the admin endpoint takes a bare port";
}

TEST(LoadValid, TlsVersionsCiphersAndSuitesPerLeg) {
  auto c = load_ok(R"(
tls:
  max_version: "1.2"
  ciphers: "ECDHE-RSA-AES256-GCM-SHA384"
  ciphersuites: "TLS_AES_256_GCM_SHA384"
upstream_tls:
  min_version: "1.3"
  max_version: "1.3"
  ciphers: "HIGH"
  ciphersuites: "TLS_CHACHA20_POLY1305_SHA256:TLS_AES_128_GCM_SHA256"
)");
  EXPECT_EQ(c->tls.min_version, "1.2");
  EXPECT_EQ(c->tls.max_version, "1.2");
  EXPECT_EQ(c->tls.ciphers, "ECDHE-RSA-AES256-GCM-SHA384");
  EXPECT_EQ(c->tls.ciphersuites, "TLS_AES_256_GCM_SHA384");
  EXPECT_EQ(c->upstream_tls.min_version, "1.3");
  EXPECT_EQ(c->upstream_tls.max_version, "1.3");
  EXPECT_EQ(c->upstream_tls.ciphers, "HIGH");
  EXPECT_EQ(c->upstream_tls.ciphersuites, "TLS_CHACHA20_POLY1305_SHA256:TLS_AES_128_GCM_SHA256");
  auto d = load_ok("");
  EXPECT_EQ(d->tls.min_version, "1.2");
  EXPECT_EQ(d->tls.max_version, "1.3");
  EXPECT_EQ(d->upstream_tls.min_version, "1.2");
  EXPECT_EQ(d->upstream_tls.max_version, "1.3");
}

TEST(LoadValid, RelativePathsResolveNextToTheFile) {
  test::TempDir dir;
  dir.write("cert.pem", "cert");
  dir.write("key.pem", "key");
  dir.write("capture.conninfo", "host=db password=from-file\n\n");
  const std::string path = dir.write("predrop.yaml",
                                     "tls: {cert_file: cert.pem, key_file: key.pem}\n"
                                     "capture: {conninfo_file: capture.conninfo}\n");
  auto r = load_file(path);
  ASSERT_TRUE(r.errors.empty()) << test::errors_text(r.errors);
  EXPECT_EQ(r.config->tls.cert_file, dir.path() + "/cert.pem");
  EXPECT_EQ(r.config->tls.key_file, dir.path() + "/key.pem");
  EXPECT_EQ(r.config->capture_conninfo_file, dir.path() + "/capture.conninfo");
  EXPECT_EQ(r.config->capture_conninfo, "host=db password=from-file");   // read and trimmed
}

TEST(LoadValid, DescribeIsLoadableYamlThatRoundTrips) {
  auto c = load_ok(R"(
listen: "[::]:7000"
limits: {max_clients: 7}
snapshots: {hash_excluded: [x], profile: {max_columns: 9}}
enrichment: {identity_sql: "select 'a: b'\nfrom t"}
rules:
  - {schema: "s*", kinds: [drop_view], action: skip}
default: {on_failure: closed}
)");
  const std::string text = describe(*c);
  auto again = load_string(text, "describe");
  ASSERT_TRUE(again.errors.empty()) << test::errors_text(again.errors) << text;
  EXPECT_EQ(describe(*again.config), text);
  EXPECT_EQ(again.config->listen.host, "::");
  EXPECT_EQ(again.config->limits.max_clients, 7);
  EXPECT_EQ(again.config->profile_max_columns, 9);
  EXPECT_EQ(again.config->enrich_identity_sql, "select 'a: b'\nfrom t");
  ASSERT_EQ(again.config->rules.size(), 1u);
  EXPECT_EQ(again.config->rules[0].kinds, 1u << *kind_from_name("drop_view"));
  EXPECT_EQ(again.config->default_rule.on_failure, OnFailure::closed);
}

TEST(LoadValid, DescribeShowsSectionsInFileLayout) {
  const std::string text = describe(Config{});
  EXPECT_NE(text.find("listen: 127.0.0.1:6432"), std::string::npos) << text;
  EXPECT_NE(text.find("limits:\n  max_clients: 10000"), std::string::npos) << text;
  EXPECT_NE(text.find("  profile:\n    max_values: 20"), std::string::npos) << text;
  EXPECT_NE(text.find("rules: []"), std::string::npos) << text;
}

TEST(LoadValid, KindNamesFollowParserOrder) {
  EXPECT_EQ(kind_name(0), "drop_table");
  EXPECT_EQ(kind_name(3), "alter_table");
  EXPECT_EQ(kind_name(7), "drop_foreign_table");
  EXPECT_EQ(kind_name(8), "");
  EXPECT_EQ(kind_from_name("truncate"), 4);
  EXPECT_FALSE(kind_from_name("drop_tables"));
}

}  // namespace
}  // namespace predrop::policy
