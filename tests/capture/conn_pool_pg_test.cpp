// ConnPool against the test cluster: which idle connection a request gets, and what a steady load
// of one request at a time leaves open once idle_close has passed (issue 21: the fleet's connections).
#include <gtest/gtest.h>

#include <array>
#include <boost/asio.hpp>
#include <chrono>
#include <string>
#include <vector>

#include "capture/conn_pool.hpp"
#include "capture/conninfo.hpp"
#include "pg_test_util.hpp"

using namespace predrop::capture;
using namespace predrop::capture::testing;
using namespace std::chrono_literals;

namespace {

ConnPool::Conn take(boost::asio::io_context& io, ConnPool& pool, const std::string& db) {
  ConnPool::Conn got;
  std::string error;
  bool answered = false;
  pool.acquire(db, [&](ConnPool::Conn c, std::string e) {
    got = std::move(c);
    error = std::move(e);
    answered = true;
  });
  while (!answered) io.run_one();
  io.restart();
  EXPECT_TRUE(got) << error;
  return got;
}

ConnPool::ParamsFn params() {
  return [](const std::string& key) { return connect_params(base_conninfo(), key, "conn_pool_pg_test", ""); };
}

// A moment of overlap: three connections open at once, then given back in `order` (indexes into
// what it returns, which is what it opened, in that order).
std::vector<ConnPool::Conn> open_three_then_release(boost::asio::io_context& io, ConnPool& pool,
                                                    const std::string& db, std::array<size_t, 3> order) {
  std::vector<ConnPool::Conn> opened;
  for (int i = 0; i < 3; ++i) opened.push_back(take(io, pool, db));
  for (size_t i : order)
    if (opened[i]) pool.release(opened[i], true);
  return opened;
}

TEST(ConnPoolPg, HandsOutTheLastReleasedIdleConnectionFirst) {
  ASSERT_TRUE(have_cluster()) << "PGHOST/PGPORT not set";
  TempDatabase db("connpool_last");
  boost::asio::io_context io;
  ConnPool pool(io, 3, params(), "test");
  const auto opened = open_three_then_release(io, pool, db.name(), {0, 2, 1});
  const auto& b = opened[1];
  const auto& c = opened[2];
  ASSERT_TRUE(opened[0] && b && c);
  ASSERT_EQ(pool.idle(), 3u);
  auto first = take(io, pool, db.name());
  EXPECT_EQ(first.get(), b.get()) << "the pool did not hand out the connection released last";
  auto second = take(io, pool, db.name());
  EXPECT_EQ(second.get(), c.get()) << "the pool did not hand out the connection released last but one";
  pool.release(first, true);
  pool.release(second, true);
  pool.close_all();
}

// The sidecar's case: a churn of one client takes and gives back one connection at a time. The
// connections opened for a moment of more (three here) must close once idle_close passes, not be
// kept alive by being handed out in turn.
TEST(ConnPoolPg, ASteadyLoadOfOneKeepsOneConnectionOpen) {
  ASSERT_TRUE(have_cluster()) << "PGHOST/PGPORT not set";
  TempDatabase db("connpool_steady");
  boost::asio::io_context io;
  ConnPool pool(io, 3, params(), "test", 1s);
  ASSERT_EQ(open_three_then_release(io, pool, db.name(), {0, 1, 2}).size(), 3u);
  ASSERT_EQ(pool.idle(), 3u);
  const auto until = std::chrono::steady_clock::now() + 2500ms;
  int rounds = 0;
  while (std::chrono::steady_clock::now() < until) {
    pool.release(take(io, pool, db.name()), true);
    io.run_for(20ms);  // the idle timer's turn
    io.restart();
    ++rounds;
  }
  EXPECT_EQ(pool.idle() + pool.busy(), 1u) << "after " << rounds << " rounds of one connection at a time, "
                                           << pool.idle() << " idle and " << pool.busy() << " busy";
  pool.close_all();
}

}  // namespace
