// PREDROP_<SECTION>_<KEY> overrides win over the file and are validated like the file.
#include "test_support.hpp"

namespace predrop::policy {
namespace {

using test::ScopedEnv;

TEST(EnvOverride, OverridesWinOverTheFile) {
  ScopedEnv clients("PREDROP_LIMITS_MAX_CLIENTS", "50");
  ScopedEnv conninfo("PREDROP_CAPTURE_CONNINFO", "host=cap password=env-secret");
  ScopedEnv listen("PREDROP_LISTEN", "[::1]:7777");
  ScopedEnv profile("PREDROP_SNAPSHOTS_PROFILE_MAX_VALUES", "3");
  ScopedEnv sslmode("PREDROP_UPSTREAM_TLS_SSLMODE", "require");
  ScopedEnv excluded("PREDROP_SNAPSHOTS_HASH_EXCLUDED", " a, b ,,c ");
  auto c = test::load_ok("limits: {max_clients: 10}\nlisten: \"127.0.0.1:1\"\n");
  EXPECT_EQ(c->limits.max_clients, 50);
  EXPECT_EQ(c->capture_conninfo, "host=cap password=env-secret");
  EXPECT_EQ(c->listen.to_string(), "[::1]:7777");
  EXPECT_EQ(c->profile_max_values, 3);
  EXPECT_EQ(c->upstream_tls.sslmode, "require");
  EXPECT_EQ(c->hash_excluded, (std::vector<std::string>{"a", "b", "c"}));
}

TEST(EnvOverride, AppliesWithoutAFile) {
  ScopedEnv hold("PREDROP_SNAPSHOTS_HOLD_TIMEOUT_MS", "900");
  auto r = load_defaults();
  ASSERT_TRUE(r.errors.empty()) << test::errors_text(r.errors);
  EXPECT_EQ(r.config->hold_timeout_ms, 900);
}

TEST(EnvOverride, InvalidValuesAreErrorsNamingTheVariable) {
  ScopedEnv clients("PREDROP_LIMITS_MAX_CLIENTS", "0");
  ScopedEnv mode("PREDROP_UPSTREAM_TLS_SSLMODE", "verify_ca");
  auto r = load_defaults();
  ASSERT_EQ(r.errors.size(), 2u) << test::errors_text(r.errors);
  EXPECT_EQ(r.config, nullptr);
  std::string all = test::errors_text(r.errors);
  EXPECT_NE(all.find("environment: PREDROP_LIMITS_MAX_CLIENTS: must be between 1 and 1000000, got 0"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("PREDROP_UPSTREAM_TLS_SSLMODE: must be one of"), std::string::npos) << all;
  EXPECT_NE(all.find("(did you mean 'verify-ca'?)"), std::string::npos) << all;
  EXPECT_EQ(r.errors[0].line, 0);
}

TEST(EnvOverride, MisspelledVariableInAKnownSectionIsAnError) {
  ScopedEnv typo("PREDROP_LIMITS_MAX_CLIENT", "5");
  auto r = load_defaults();
  ASSERT_EQ(r.errors.size(), 1u) << test::errors_text(r.errors);
  EXPECT_EQ(r.errors[0].message,
            "PREDROP_LIMITS_MAX_CLIENT: unknown override (did you mean 'PREDROP_LIMITS_MAX_CLIENTS'?)");
}

TEST(EnvOverride, OtherPredropVariablesAreNotOurs) {
  ScopedEnv bin("PREDROP_BIN", "/usr/bin/predrop");
  ScopedEnv other("PREDROP_SOME_TOOL_SETTING", "x");
  EXPECT_TRUE(load_defaults().errors.empty());
}

TEST(EnvOverride, EmptyValueOfARequiredKeyIsAnError) {
  ScopedEnv empty("PREDROP_THREADS", "");
  auto r = load_defaults();
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].message, "PREDROP_THREADS: expected an integer 0..1024, got nothing");
}

TEST(EnvOverride, KillSwitchTurnsSnapshotsOffAndWinsOverEverything) {
  for (const char* off : {"off", "0", "false", "no", "OFF"}) {
    ScopedEnv kill("PREDROP_SNAPSHOTS", off);
    ScopedEnv enabled("PREDROP_SNAPSHOTS_ENABLED", "true");
    EXPECT_FALSE(test::load_ok("snapshots: {enabled: true}\n")->snapshots_enabled) << off;
  }
  for (const char* on : {"on", "1", "true", "yes"}) {
    ScopedEnv kill("PREDROP_SNAPSHOTS", on);
    EXPECT_TRUE(test::load_ok("snapshots: {enabled: false}\n")->snapshots_enabled) << on;
  }
}

TEST(EnvOverride, KillSwitchRejectsOtherWords) {
  ScopedEnv kill("PREDROP_SNAPSHOTS", "disabled");
  auto r = load_defaults();
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].message, "PREDROP_SNAPSHOTS: expected on or off, got 'disabled'");
}

TEST(EnvOverride, EnvironmentConninfoReplacesTheFilesConninfoFile) {
  ScopedEnv conninfo("PREDROP_STORE_CONNINFO", "host=env");
  auto c = test::load_ok("store: {conninfo_file: /nonexistent/secret}\n");
  EXPECT_EQ(c->store_conninfo, "host=env");
  EXPECT_EQ(c->store_conninfo_file, "");
}

TEST(EnvOverride, EnvironmentConninfoFileReplacesTheFilesConninfo) {
  test::TempDir dir;
  const std::string secret = dir.write("store", "  host=db password=mounted  \n");
  ScopedEnv file("PREDROP_STORE_CONNINFO_FILE", secret);
  auto c = test::load_ok("store: {conninfo: \"host=db password=inline\"}\n");
  EXPECT_EQ(c->store_conninfo, "host=db password=mounted");
  EXPECT_EQ(c->store_conninfo_file, secret);
}

TEST(EnvOverride, BothConninfoAndFileInTheEnvironmentIsAnError) {
  ScopedEnv a("PREDROP_CAPTURE_CONNINFO", "host=a");
  ScopedEnv b("PREDROP_CAPTURE_CONNINFO_FILE", "/x");
  auto r = load_defaults();
  ASSERT_EQ(r.errors.size(), 1u) << test::errors_text(r.errors);
  EXPECT_EQ(r.errors[0].file, "environment");
  EXPECT_NE(r.errors[0].message.find("not both"), std::string::npos);
}

TEST(EnvOverride, EmptyConninfoFileIsAnError) {
  test::TempDir dir;
  ScopedEnv file("PREDROP_CAPTURE_CONNINFO_FILE", dir.write("empty", "\n"));
  auto r = load_defaults();
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_NE(r.errors[0].message.find("is empty"), std::string::npos);
}

TEST(EnvOverride, FileErrorsAndEnvironmentErrorsAreReportedTogether) {
  ScopedEnv clients("PREDROP_LIMITS_MAX_CLIENTS", "x");
  auto errors = test::load_errors("threads: many\n");
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0].file, "test.yaml");
  EXPECT_EQ(errors[1].file, "environment");
}

}  // namespace
}  // namespace predrop::policy
