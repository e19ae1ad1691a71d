// The announcer (capture/announcer.hpp) against a store that does not answer, then does: at most
// kMaxWaiting announcements wait, the oldest dropped and counted, and once the store answers the
// ones kept are all sent, in order. The store "does not answer" because its role does not exist
// yet: every connection is refused, as when it is down, and creating the role brings it back while
// a listener already waits on the channel.
#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <poll.h>

#include <atomic>
#include <boost/asio.hpp>
#include <chrono>
#include <string>
#include <vector>

#include "capture/announcer.hpp"
#include "capture/capture.hpp"
#include "capture/capture_counters.hpp"
#include "capture/conn_pool.hpp"
#include "capture/conninfo.hpp"
#include "capture/ledger_writer.hpp"
#include "capture/store_health.hpp"
#include "capture/store_writer.hpp"
#include "pg_test_util.hpp"

using namespace predrop::capture;
using namespace predrop::capture::testing;
using namespace std::chrono_literals;

namespace {

using Clock = std::chrono::steady_clock;

// Runs the event loop until `done` or the deadline; false when the deadline came first.
template <class Done>
bool run_until(boost::asio::io_context& io, Done done, std::chrono::seconds limit) {
  const auto end = Clock::now() + limit;
  while (!done()) {
    if (Clock::now() >= end) return false;
    io.run_for(20ms);
    io.restart();
  }
  return true;
}

// The payloads heard on the channel so far, from a connection that LISTENs on it.
void hear(PGconn* listener, std::vector<std::string>& heard) {
  PQconsumeInput(listener);
  while (PGnotify* n = PQnotifies(listener)) {
    heard.emplace_back(n->extra);
    PQfreemem(n);
  }
}

TEST(AnnouncerPg, KeepsTheNewestWithinItsBoundWhileTheStoreIsAwayThenSendsThemInOrder) {
  ASSERT_TRUE(have_cluster()) << "PGHOST/PGPORT not set";
  TempDatabase store("announcer_store");
  const std::string role = unique_name("announcer_role");
  // Dropped however the test ends (roles outlive the test's database).
  struct RoleGone {
    const std::string& role;
    ~RoleGone() {
      try {
        Db admin("postgres");
        admin.exec("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '" + role + "'");
        admin.exec("DROP ROLE IF EXISTS " + role);
      } catch (const std::exception&) {
      }
    }
  } role_gone{role};

  CaptureConfig cfg;
  cfg.store_conninfo = conninfo_for(store.name()) + " user=" + role;
  cfg.store_retry_max = 10;
  boost::asio::io_context io;
  std::atomic<bool> stopped{false};
  CaptureCounters counters;
  ConnPool pool(io, 1, [&](const std::string&) { return connect_params(cfg.store_conninfo, "", "announcer_test", ""); },
                "store");
  StoreHealth health(cfg.store_conninfo, cfg.store_table, cfg.events_table, std::chrono::milliseconds(3600 * 1000));
  const StoreSql sql = build_store_sql("predrop.schema_snapshots", "predrop.drop_events");
  LedgerWriter ledger(io, pool, cfg, health, counters, stopped, [&](PgConn&) -> const StoreSql& { return sql; });
  Announcer announcer(ledger, counters, [] {});

  // The first goes out at once and meets the refused connection: it waits in the store's retry
  // queue, and every later one waits in the announcer's.
  announcer.add("first");
  announcer.flush();
  ASSERT_TRUE(run_until(io, [&] { return counters.retry_queued.load() == 1; }, 10s))
      << "the refused announcement was kept for retry";
  const size_t bound = Announcer::kMaxWaiting;
  for (size_t i = 0; i <= bound; ++i) announcer.add("p" + std::to_string(i));
  announcer.flush();
  EXPECT_EQ(announcer.waiting(), bound);
  EXPECT_EQ(counters.announcements_lost.load(), 1u) << "one past the bound: the oldest waiting (p0) is dropped";
  EXPECT_EQ(counters.announced.load(), 0u);

  Db listen_db(store.name());
  listen_db.exec(std::string("LISTEN ") + kSnapshotChannel);
  Db("postgres").exec("CREATE ROLE " + role + " LOGIN");

  std::vector<std::string> heard;
  const size_t expected = 1 + bound;  // "first", then p1 .. p10000
  const bool all_sent = run_until(io, [&] { return counters.announced.load() >= expected; }, 30s);
  const auto end = Clock::now() + 10s;
  while (heard.size() < expected && Clock::now() < end) {
    pollfd p{PQsocket(listen_db.raw()), POLLIN, 0};
    poll(&p, 1, 50);
    hear(listen_db.raw(), heard);
  }
  EXPECT_TRUE(all_sent) << "announced " << counters.announced.load() << " of " << expected;
  EXPECT_EQ(counters.announced.load(), expected);
  EXPECT_EQ(counters.announcements_lost.load(), 1u);
  EXPECT_EQ(announcer.waiting(), 0u);
  EXPECT_EQ(heard.size(), expected) << "every kept announcement was heard once";
  if (heard.size() == expected) {
    EXPECT_EQ(heard.front(), "first");
    bool in_order = true;
    for (size_t i = 1; i < expected; ++i) in_order = in_order && heard[i] == "p" + std::to_string(i);
    EXPECT_TRUE(in_order) << "heard p1 .. p" << bound << " in the order added, p0 dropped; second heard: " << heard[1];
  }

  stopped = true;
  ledger.shutdown();
  pool.close_all();
  health.stop();
}

}  // namespace
