// Binding the listen addresses: every address of a name, all or none. The resolver of this machine
// gives one address for localhost, so the two-address cases call bind_listeners with the list a
// dual-stack host's resolver gives (127.0.0.1 and ::1) and real sockets.
#include <gtest/gtest.h>

#include <algorithm>
#include <boost/asio.hpp>
#include <stdexcept>
#include <string>

#include "proxy/listen.hpp"

namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using predrop::proxy::bind_listeners;
using predrop::proxy::listen_endpoints;

bool ipv6_loopback_usable(asio::io_context& io) {
  boost::system::error_code ec;
  tcp::acceptor a(io);
  a.open(tcp::v6(), ec);
  if (!ec) a.bind(tcp::endpoint(asio::ip::address_v6::loopback(), 0), ec);
  return !ec;
}

// A port free on both loopback addresses right now.
unsigned short free_dual_port(asio::io_context& io) {
  for (int i = 0; i < 50; ++i) {
    tcp::acceptor v4(io, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
    unsigned short port = v4.local_endpoint().port();
    v4.close();
    boost::system::error_code ec;
    tcp::acceptor v6(io);
    v6.open(tcp::v6(), ec);
    if (!ec) v6.bind(tcp::endpoint(asio::ip::address_v6::loopback(), port), ec);
    if (!ec) return port;
  }
  throw std::runtime_error("no port free on both 127.0.0.1 and ::1");
}

std::string label(const tcp::endpoint& ep) { return "listen test (" + ep.address().to_string() + ")"; }

bool connects(asio::io_context& io, const tcp::endpoint& ep) {
  boost::system::error_code ec;
  tcp::socket s(io);
  s.connect(ep, ec);
  return !ec;
}

TEST(Listen, LiteralIsOneAddress) {
  asio::io_context io;
  auto eps = listen_endpoints(io.get_executor(), predrop::policy::Endpoint{"127.0.0.1", 6432}, "listen");
  ASSERT_EQ(eps.size(), 1u);
  EXPECT_EQ(eps[0], tcp::endpoint(asio::ip::make_address("127.0.0.1"), 6432));
}

TEST(Listen, NameGivesEveryResolvedAddressOnce) {
  asio::io_context io;
  auto eps = listen_endpoints(io.get_executor(), predrop::policy::Endpoint{"localhost", 6432}, "listen");
  ASSERT_FALSE(eps.empty());
  tcp::resolver resolver(io);
  auto found = resolver.resolve("localhost", "6432", tcp::resolver::passive);
  for (const auto& entry : found)
    EXPECT_NE(std::find(eps.begin(), eps.end(), entry.endpoint()), eps.end()) << entry.endpoint() << " not bound";
  for (size_t i = 0; i < eps.size(); ++i) {
    EXPECT_TRUE(eps[i].address().is_loopback()) << eps[i];
    for (size_t j = i + 1; j < eps.size(); ++j) EXPECT_NE(eps[i], eps[j]) << "listed twice";
  }
}

TEST(Listen, NameThatDoesNotResolveSaysWhich) {
  asio::io_context io;
  try {
    listen_endpoints(io.get_executor(), predrop::policy::Endpoint{"no-such-host.invalid", 6432}, "admin");
    FAIL() << "resolved";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("admin no-such-host.invalid:6432: cannot resolve host"), std::string::npos)
        << e.what();
  }
}

TEST(Listen, BindsIPv4AndIPv6AddressesOfOneName) {
  asio::io_context io;
  // Fails rather than skips: a test that cannot run must not pass (the kernel has IPv6 disabled).
  ASSERT_TRUE(ipv6_loopback_usable(io)) << "no IPv6 loopback ([::1]) here: enable IPv6 on lo to run this test";
  unsigned short port = free_dual_port(io);
  tcp::endpoint v4(asio::ip::address_v4::loopback(), port), v6(asio::ip::address_v6::loopback(), port);
  auto acceptors = bind_listeners(io.get_executor(), {v4, v6}, label, 16);
  ASSERT_EQ(acceptors.size(), 2u);
  EXPECT_TRUE(connects(io, v4));
  EXPECT_TRUE(connects(io, v6));
  EXPECT_TRUE(acceptors[1].local_endpoint().address().is_v6());
}

TEST(Listen, OneAddressTakenBindsNone) {
  asio::io_context io;
  // Fails rather than skips: a test that cannot run must not pass (the kernel has IPv6 disabled).
  ASSERT_TRUE(ipv6_loopback_usable(io)) << "no IPv6 loopback ([::1]) here: enable IPv6 on lo to run this test";
  unsigned short port = free_dual_port(io);
  tcp::endpoint v4(asio::ip::address_v4::loopback(), port), v6(asio::ip::address_v6::loopback(), port);
  tcp::acceptor holder(io, v6);   // something else owns [::1]:port
  try {
    bind_listeners(io.get_executor(), {v4, v6}, label, 16);
    FAIL() << "bound although [::1]:" << port << " is taken";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("listen test (::1): cannot bind: Address already in use"), std::string::npos)
        << e.what();
  }
  // The IPv4 listener opened first was closed with the failure: nothing of predrop stays behind.
  EXPECT_FALSE(connects(io, v4)) << "127.0.0.1:" << port << " still accepts";
  boost::system::error_code ec;
  tcp::acceptor again(io);
  again.open(tcp::v4(), ec);
  again.bind(v4, ec);
  EXPECT_FALSE(ec) << ec.message();
}

}  // namespace
