// Passwords never appear in describe() or mask_conninfo(), in either conninfo spelling.
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
