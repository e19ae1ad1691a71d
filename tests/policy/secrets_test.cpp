// Passwords never appear in describe() or mask_conninfo(), in either conninfo spelling.
#include <map>

#include "test_support.hpp"

namespace predrop::policy {
namespace {

TEST(MaskConninfo, KeyValueForm) {
  EXPECT_EQ(mask_conninfo("host=db user=u password=s3cret dbname=x"), "host=db user=u password=**** dbname=x");
  EXPECT_EQ(mask_conninfo("password = 'two words' host=db"), "password = **** host=db");
  EXPECT_EQ(mask_conninfo("password='it\\'s' host=db"), "password=**** host=db");
  EXPECT_EQ(mask_conninfo("PASSWORD=x sslpassword=y"), "PASSWORD=**** sslpassword=****");
  EXPECT_EQ(mask_conninfo("host=db"), "host=db");
  EXPECT_EQ(mask_conninfo(""), "");
}

TEST(MaskConninfo, UriForm) {
  EXPECT_EQ(mask_conninfo("postgresql://user:pass@host:5432/db"), "postgresql://user:****@host:5432/db");
  EXPECT_EQ(mask_conninfo("postgres://user:p%40ss@host/db?sslmode=require&password=q"),
            "postgres://user:****@host/db?sslmode=require&password=****");
  EXPECT_EQ(mask_conninfo("postgresql://user@host/db"), "postgresql://user@host/db");
  EXPECT_EQ(mask_conninfo("postgresql://host"), "postgresql://host");
  EXPECT_EQ(mask_conninfo("PostgreSQL://u:pw@h"), "PostgreSQL://u:****@h");
}

TEST(Describe, MasksEverySecret) {
  test::TempDir dir;
  const std::string secret = dir.write("store", "postgresql://store:file-secret@db/s\n");
  test::ScopedEnv env("PREDROP_CAPTURE_CONNINFO", "host=c password=env-secret");
  auto c = test::load_ok("store: {conninfo_file: " + secret + "}\n");
  const std::string text = describe(*c);
  EXPECT_EQ(text.find("env-secret"), std::string::npos) << text;
  EXPECT_EQ(text.find("file-secret"), std::string::npos) << text;
  EXPECT_NE(text.find("host=c password=****"), std::string::npos) << text;
  EXPECT_NE(text.find("postgresql://store:****@db/s"), std::string::npos) << text;
  EXPECT_NE(text.find(secret), std::string::npos) << "the file's path is not secret:\n" << text;
}

// The console's SHOW CONFIG: one row per key, secrets masked, rules by index, reload behaviour.
TEST(ConfigValues, MasksSecretsAndListsRulesAndConsoleKeys) {
  test::TempDir dir;
  const std::string secret = dir.write("store", "postgresql://store:file-secret@db/s\n");
  test::ScopedEnv env("PREDROP_CAPTURE_CONNINFO", "host=c password=env-secret");
  auto c = test::load_ok("store: {conninfo_file: " + secret + "}\nconsole: {database: ops, users: [alice, bob]}\n"
                         "rules: [{schema: raw, action: quarantine}]\n");
  std::map<std::string, ConfigValue> by_key;
  for (auto& v : config_values(*c)) {
    EXPECT_EQ(v.value.find("env-secret"), std::string::npos) << v.key;
    EXPECT_EQ(v.value.find("file-secret"), std::string::npos) << v.key;
    by_key.emplace(v.key, v);
  }
  ASSERT_TRUE(by_key.count("capture.conninfo"));
  EXPECT_EQ(by_key.at("capture.conninfo").value, "host=c password=****");
  EXPECT_EQ(by_key.at("console.database").value, "ops");
  EXPECT_EQ(by_key.at("console.role").value, "predrop_admin");
  EXPECT_EQ(by_key.at("console.users").value, "alice, bob");
  EXPECT_EQ(by_key.at("console.users").reload, ReloadBehaviour::sighup);
  EXPECT_EQ(by_key.at("listen").reload, ReloadBehaviour::restart);
  ASSERT_TRUE(by_key.count("rules[0].schema"));
  EXPECT_EQ(by_key.at("rules[0].schema").value, "raw");
  EXPECT_EQ(by_key.at("rules[0].action").value, "quarantine");
  EXPECT_FALSE(by_key.count("rules[0].user")) << "a who-condition left out is not shown";
}

TEST(Describe, ErrorsNeverEchoAConninfo) {
  // Conninfo keys take any string, so no validation message can repeat a password.
  for (const char* yaml : {"capture: {conninfo: [\"password=leak\"]}\n", "capture: \"password=leak\"\n",
                           "store: {conninfo: {password: leak}}\n"}) {
    auto r = test::load_errors(yaml);
    EXPECT_EQ(test::errors_text(r).find("leak"), std::string::npos) << test::errors_text(r);
  }
}

}  // namespace
}  // namespace predrop::policy
