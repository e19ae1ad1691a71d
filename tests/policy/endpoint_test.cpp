#include "test_support.hpp"

namespace predrop::policy {
namespace {

TEST(Endpoint, ParsesHostAndPort) {
  auto e = parse_endpoint("db.internal:5432");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->host, "db.internal");
  EXPECT_EQ(e->port, 5432);
  EXPECT_EQ(e->to_string(), "db.internal:5432");
}

TEST(Endpoint, ParsesBracketedIpv6) {
  auto e = parse_endpoint("[::1]:6432");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->host, "::1");
  EXPECT_EQ(e->port, 6432);
  EXPECT_EQ(e->to_string(), "[::1]:6432");
  EXPECT_TRUE(parse_endpoint("[fe80::1%eth0]:1"));
}

TEST(Endpoint, RejectsMalformed) {
  for (const char* bad : {"", "db", ":5432", "db:", "db:0", "db:65536", "db:-1", "db:54x", "::1:5432", "[::1]5432",
                          "[::1]:", "[]:1", "[db]:1", "d b:1", "db:+1"})
    EXPECT_FALSE(parse_endpoint(bad)) << bad;
  EXPECT_TRUE(parse_endpoint("db:65535"));
  EXPECT_TRUE(parse_endpoint("0.0.0.0:1"));
}

}  // namespace
}  // namespace predrop::policy
