// ConnPool against a server that accepts TCP and never answers: no database needed.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <boost/asio.hpp>
#include <chrono>
#include <memory>
#include <string>

#include "capture/conn_pool.hpp"
#include "capture/conninfo.hpp"

namespace predrop::capture {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;

// Stopping while a connection is still opening must end that attempt: PQfinish its connection
// (the peer sees the socket close) and count it closed. An attempt left alone keeps itself alive
// through its own completion handler and is never freed (LeakSanitizer saw it once in CI-like runs).
TEST(ConnPool, CloseAllEndsConnectionsStillOpening) {
  asio::io_context io;
  tcp::acceptor silent(io, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
  const auto port = silent.local_endpoint().port();
  tcp::socket accepted(io);
  silent.async_accept(accepted, [](const boost::system::error_code&) {});

  ConnPool pool(io, 2, [port](const std::string& key) {
    return connect_params("host=127.0.0.1 port=" + std::to_string(port) + " user=nobody sslmode=disable", key,
                          "conn_pool_test", "");
  }, "test");
  bool called = false;
  pool.acquire("db", [&](ConnPool::Conn, std::string) { called = true; });
  io.run_for(300ms);
  ASSERT_TRUE(accepted.is_open()) << "the pool never connected";
  EXPECT_EQ(pool.busy(), 1u) << "the attempt should still be waiting for the server's answer";

  pool.close_all();
  EXPECT_EQ(pool.busy(), 0u) << "an attempt still opening was not counted closed";

  // The server side reads EOF once the pool has closed the client socket (plain recv with a
  // timeout: asio's blocking read would wait forever on a socket that stays open).
  timeval five_seconds{5, 0};
  ::setsockopt(accepted.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &five_seconds, sizeof five_seconds);
  // libpq sent its startup packet first: read past it to the end of the stream.
  char buf[512];
  ssize_t n;
  size_t got = 0;
  while ((n = ::recv(accepted.native_handle(), buf, sizeof buf, 0)) > 0) got += static_cast<size_t>(n);
  EXPECT_EQ(n, 0) << "no EOF after " << got << " bytes: the connection still opening was left open";
  EXPECT_FALSE(called) << "a closed pool must not call back";
}

}  // namespace
}  // namespace predrop::capture
