// Cidr: the client_addr of rules. One address is a /32 or /128; an IPv4 block matches IPv4 clients
// (and the IPv4-mapped IPv6 form a dual-stack listener reports), an IPv6 block IPv6 clients.
#include <gtest/gtest.h>

#include "policy/cidr.hpp"

namespace predrop::policy {
namespace {

Cidr cidr(std::string_view text) {
  std::string why;
  auto c = parse_cidr(text, &why);
  EXPECT_TRUE(c) << text << ": " << why;
  return c ? *c : Cidr{};
}

std::string error_of(std::string_view text) {
  std::string why;
  EXPECT_FALSE(parse_cidr(text, &why)) << text;
  return why;
}

TEST(Cidr, SingleAddressIsTheFullPrefix) {
  EXPECT_EQ(cidr("127.0.0.1").prefix, 32);
  EXPECT_TRUE(cidr("127.0.0.1").contains("127.0.0.1"));
  EXPECT_FALSE(cidr("127.0.0.1").contains("127.0.0.2"));
  EXPECT_EQ(cidr("::1").prefix, 128);
  EXPECT_TRUE(cidr("::1").contains("::1"));
  EXPECT_TRUE(cidr("::1").contains("0:0:0:0:0:0:0:1"));   // any spelling of the same address
  EXPECT_FALSE(cidr("::1").contains("::2"));
}

TEST(Cidr, Ipv4Blocks) {
  Cidr ten = cidr("10.0.0.0/8");
  EXPECT_TRUE(ten.contains("10.0.0.0"));
  EXPECT_TRUE(ten.contains("10.255.255.255"));
  EXPECT_FALSE(ten.contains("11.0.0.0"));
  EXPECT_FALSE(ten.contains("9.255.255.255"));
  Cidr odd = cidr("192.168.4.0/22");   // a prefix that does not end on a byte
  EXPECT_TRUE(odd.contains("192.168.7.255"));
  EXPECT_FALSE(odd.contains("192.168.8.0"));
  EXPECT_FALSE(odd.contains("192.168.3.255"));
  EXPECT_TRUE(cidr("127.0.0.1/32").contains("127.0.0.1"));
  EXPECT_FALSE(cidr("127.0.0.1/32").contains("127.0.0.10"));
}

TEST(Cidr, Ipv6Blocks) {
  Cidr doc = cidr("2001:db8::/32");
  EXPECT_TRUE(doc.contains("2001:db8::1"));
  EXPECT_TRUE(doc.contains("2001:db8:ffff:ffff:ffff:ffff:ffff:ffff"));
  EXPECT_FALSE(doc.contains("2001:db9::"));
  Cidr odd = cidr("fc00::/7");
  EXPECT_TRUE(odd.contains("fc00::1"));
  EXPECT_TRUE(odd.contains("fdff::1"));
  EXPECT_FALSE(odd.contains("fe00::1"));
  EXPECT_TRUE(cidr("fe80::/10").contains("fe80::1%eth0"));   // the zone is not part of the address
}

TEST(Cidr, SlashZeroIsEveryAddressOfItsFamily) {
  Cidr any4 = cidr("0.0.0.0/0");
  EXPECT_TRUE(any4.contains("0.0.0.0"));
  EXPECT_TRUE(any4.contains("255.255.255.255"));
  EXPECT_TRUE(any4.contains("::ffff:10.1.2.3"));
  EXPECT_FALSE(any4.contains("::1"));
  Cidr any6 = cidr("::/0");
  EXPECT_TRUE(any6.contains("::1"));
  EXPECT_TRUE(any6.contains("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"));
  EXPECT_FALSE(any6.contains("127.0.0.1"));
}

TEST(Cidr, MappedIpv4IsTheIpv4Client) {
  EXPECT_TRUE(cidr("127.0.0.1").contains("::ffff:127.0.0.1"));
  EXPECT_TRUE(cidr("10.0.0.0/8").contains("::ffff:10.9.8.7"));
  EXPECT_FALSE(cidr("10.0.0.0/8").contains("::ffff:11.0.0.1"));
  EXPECT_FALSE(cidr("::/0").contains("::ffff:10.9.8.7"));
}

TEST(Cidr, WhatIsNotAnAddressMatchesNothing) {
  Cidr any4 = cidr("0.0.0.0/0");
  EXPECT_FALSE(any4.contains(""));
  EXPECT_FALSE(any4.contains("localhost"));
  EXPECT_FALSE(any4.contains("/tmp/.s.PGSQL.5432"));
  EXPECT_FALSE(any4.contains("10.0.0"));
}

TEST(Cidr, BadTextIsRefusedWithTheReason) {
  EXPECT_NE(error_of("10.0.0.0/33").find("prefix /33 is above 32"), std::string::npos);
  EXPECT_NE(error_of("::/129").find("prefix /129 is above 128"), std::string::npos);
  EXPECT_NE(error_of("10.0.0.0/").find("is not a number"), std::string::npos);
  EXPECT_NE(error_of("10.0.0.0/8x").find("is not a number"), std::string::npos);
  EXPECT_NE(error_of("10.0.0.0/-1").find("is not a number"), std::string::npos);
  EXPECT_NE(error_of("10.0.0.256").find("not an IPv4 or IPv6 address"), std::string::npos);
  EXPECT_NE(error_of("10.1/16").find("not an IPv4 or IPv6 address"), std::string::npos);
  EXPECT_NE(error_of("localhost").find("not an IPv4 or IPv6 address"), std::string::npos);
  EXPECT_NE(error_of("").find("not an IPv4 or IPv6 address"), std::string::npos);
  EXPECT_NE(error_of("2001:db8::g/32").find("not an IPv4 or IPv6 address"), std::string::npos);
  EXPECT_NE(error_of("10.1.2.3/8").find("did you mean 10.0.0.0/8?"), std::string::npos);
  EXPECT_NE(error_of("2001:db8::1/32").find("did you mean 2001:db8::/32?"), std::string::npos);
  EXPECT_NE(error_of("fd00::/7").find("did you mean fc00::/7?"), std::string::npos);
}

TEST(Cidr, ToStringIsCanonical) {
  EXPECT_EQ(cidr("10.0.0.0/8").to_string(), "10.0.0.0/8");
  EXPECT_EQ(cidr("::1").to_string(), "::1/128");
  EXPECT_EQ(cidr("2001:0db8:0000::/32").to_string(), "2001:db8::/32");
}

}  // namespace
}  // namespace predrop::policy
