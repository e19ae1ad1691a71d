// Session lifecycle through predrop: CancelRequest, a client vanishing mid-query, the server
// ending a backend, and the SIGTERM drain.
#include <signal.h>

#include <chrono>
#include <thread>

#include "proxy_test_util.hpp"

namespace ptest {
namespace {

using Clock = std::chrono::steady_clock;

long long ms_since(Clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
}

// Is a backend with this pid still listed in pg_stat_activity? (direct connection)
bool backend_alive(RawConn& admin, uint32_t pid) {
  auto q = admin.simple_query("SELECT count(*) FROM pg_stat_activity WHERE pid = " + std::to_string(pid));
  return q.complete && !q.error && !q.rows.empty() && q.rows[0][0].value_or("0") != "0";
}

// Waits until pg_stat_activity shows the backend in state `state` running a query containing `needle`.
bool wait_backend_state(RawConn& admin, uint32_t pid, const std::string& state, Ms timeout) {
  auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    auto q = admin.simple_query("SELECT state FROM pg_stat_activity WHERE pid = " + std::to_string(pid));
    if (q.complete && !q.rows.empty() && q.rows[0][0].value_or("") == state) return true;
    std::this_thread::sleep_for(50ms);
  }
  return false;
}

class Lifecycle : public ::testing::Test {
 protected:
  void SetUp() override { PTEST_START(proxy_); }
  void TearDown() override {
    if (proxy_.pid() > 0) {
      PTEST_EXPECT_ALIVE(proxy_);
    }
  }
  PredropProcess proxy_;
};

TEST_F(Lifecycle, CancelRequestThroughPredropCancelsQuery) {
  RawConn c = proxy_.connect();
  auto s = c.startup(default_params("ptest-cancel"));
  ASSERT_TRUE(s.ok);
  ASSERT_EQ(s.key.size(), 8u) << "BackendKeyData (protocol 3.0: pid + secret)";
  RawConn admin = direct_admin();
  ASSERT_TRUE(c.send(msg::query("SELECT pg_sleep(30)")));
  ASSERT_TRUE(wait_backend_state(admin, c.backend_pid(s), "active", 10000ms)) << "the query never started";

  auto t0 = Clock::now();
  RawConn cancel = proxy_.connect();
  ASSERT_TRUE(cancel.send(msg::cancel_request(s.key)));
  // PostgreSQL closes a cancel connection without a reply; so must predrop.
  EXPECT_TRUE(cancel.wait_closed(5000ms)) << "cancel connection left open";
  EXPECT_EQ(cancel.buffered(), 0u);

  bool complete = false;
  auto reply = c.read_until('Z', 1, 10000ms, &complete);
  auto ms = ms_since(t0);
  ASSERT_TRUE(complete) << "query not ended within 10 s of the CancelRequest";
  std::optional<ErrorInfo> err;
  for (const auto& m : reply)
    if (m.type == 'E') err = parse_error(m);
  ASSERT_TRUE(err.has_value()) << "no ErrorResponse";
  EXPECT_EQ(err->sqlstate, "57014") << err->message;
  EXPECT_LT(ms, 5000) << "cancel took " << ms << " ms";
  std::cout << "cancel took " << ms << " ms\n";
  // The session is usable afterwards.
  auto q = c.simple_query("SELECT 'after cancel'");
  EXPECT_TRUE(q.complete && !q.error);
}

TEST_F(Lifecycle, CancelRequestWithWrongKeyIsIgnored) {
  RawConn c = proxy_.connect();
  auto s = c.startup(default_params("ptest-cancel-wrong"));
  ASSERT_TRUE(s.ok);
  ASSERT_TRUE(c.send(msg::query("SELECT pg_sleep(1.5), 'finished'")));
  std::string wrong = s.key;
  wrong[7] = static_cast<char>(wrong[7] ^ 0x5a);
  RawConn cancel = proxy_.connect();
  ASSERT_TRUE(cancel.send(msg::cancel_request(wrong)));
  EXPECT_TRUE(cancel.wait_closed(5000ms));
  bool complete = false;
  auto reply = c.read_until('Z', 1, 10000ms, &complete);
  ASSERT_TRUE(complete);
  for (const auto& m : reply) EXPECT_NE(m.type, 'E') << "a CancelRequest with a wrong secret cancelled: " << m.describe();
}

TEST_F(Lifecycle, ClientVanishesMidQueryBackendGoesAway) {
  RawConn admin = direct_admin();
  for (bool reset : {false, true}) {
    SCOPED_TRACE(reset ? "client resets (RST)" : "client closes (FIN)");
    RawConn c = proxy_.connect();
    // The server notices a closed client socket within 200 ms of predrop closing it, even mid-sleep.
    auto params = default_params("ptest-vanish");
    params.emplace_back("options", "-c client_connection_check_interval=200");
    auto s = c.startup(params);
    ASSERT_TRUE(s.ok) << (s.error ? s.error->message : c.last_error());
    uint32_t pid = c.backend_pid(s);
    ASSERT_TRUE(c.send(msg::query("SELECT pg_sleep(30)")));
    ASSERT_TRUE(wait_backend_state(admin, pid, "active", 10000ms)) << "the query never started";
    auto t0 = Clock::now();
    if (reset) c.abort();
    else c.close();
    while (backend_alive(admin, pid) && ms_since(t0) < 8000) std::this_thread::sleep_for(50ms);
    EXPECT_FALSE(backend_alive(admin, pid))
        << "backend " << pid << " still there " << ms_since(t0) << " ms after the client vanished";
    std::cout << "backend gone " << ms_since(t0) << " ms after the client vanished\n";
  }
}

// The bytes and the end of a connection often reach predrop in one readiness edge. Behind half a
// message nothing else will ever announce that end, so predrop has to see it in that edge.
TEST_F(Lifecycle, ClientVanishingRightAfterHalfAMessageIsNoticed) {
  RawConn admin = direct_admin();
  std::vector<uint32_t> pids;
  for (int i = 0; i < 40; ++i) {
    RawConn c = proxy_.connect();
    auto s = c.startup(default_params("ptest-vanish-half"));
    ASSERT_TRUE(s.ok) << (s.error ? s.error->message : c.last_error());
    pids.push_back(c.backend_pid(s));
    std::string big = msg::parse("", "SELECT '" + std::string(100 * 1024, 'h') + "'");
    ASSERT_TRUE(c.send(std::string_view(big).substr(0, big.size() / 2 + i)));
    if (i % 2) c.abort();
    else c.close();
  }
  auto alive = [&] {
    int n = 0;
    for (auto pid : pids) n += backend_alive(admin, pid) ? 1 : 0;
    return n;
  };
  auto t0 = Clock::now();
  while (alive() > 0 && ms_since(t0) < 8000) std::this_thread::sleep_for(50ms);
  EXPECT_EQ(alive(), 0) << "upstream backends still connected " << ms_since(t0)
                        << " ms after their clients left in the middle of a message";
}

TEST_F(Lifecycle, ClientVanishesWhileIdleBackendGoesAway) {
  RawConn admin = direct_admin();
  RawConn c = proxy_.connect();
  auto s = c.startup(default_params("ptest-vanish-idle"));
  ASSERT_TRUE(s.ok);
  uint32_t pid = c.backend_pid(s);
  ASSERT_TRUE(backend_alive(admin, pid));
  c.abort();
  auto t0 = Clock::now();
  while (backend_alive(admin, pid) && ms_since(t0) < 5000) std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(backend_alive(admin, pid)) << "idle backend still there after the client reset";
}

void expect_terminated(RawConn& c, const char* context) {
  // A query's RowDescription may come first; the next thing after it must be the error.
  auto first = c.read_message(10000ms);
  while (first && first->type == 'T') first = c.read_message(10000ms);
  ASSERT_TRUE(first.has_value()) << context << ": no message after the backend was terminated ("
                                 << (c.eof() ? "closed without an error" : "timeout") << ")";
  ASSERT_EQ(first->type, 'E') << context << ": " << first->describe();
  auto e = parse_error(*first);
  EXPECT_TRUE(e.sqlstate == "57P01" || e.sqlstate == "08006") << context << ": " << e.sqlstate << " " << e.message;
  EXPECT_EQ(e.severity, "FATAL");
  // Whatever else comes (predrop may add its own 08006), the connection then closes.
  int extra = 0;
  while (auto m = c.read_message(5000ms)) {
    ++extra;
    EXPECT_EQ(m->type, 'E') << context << ": unexpected after the FATAL: " << m->describe();
  }
  EXPECT_TRUE(c.eof()) << context << ": connection not closed after the server ended the backend";
  EXPECT_LE(extra, 1) << context;
}

TEST_F(Lifecycle, UpstreamBackendTerminatedWhileIdle) {
  RawConn admin = direct_admin();
  RawConn c = proxy_.connect();
  auto s = c.startup(default_params("ptest-terminated-idle"));
  ASSERT_TRUE(s.ok);
  auto r = admin.simple_query("SELECT pg_terminate_backend(" + std::to_string(c.backend_pid(s)) + ")");
  ASSERT_TRUE(r.complete && !r.error);
  ASSERT_EQ(r.rows.at(0).at(0).value_or(""), "t");
  expect_terminated(c, "idle");
  expect_serves_normal_session(proxy_, "after a terminated backend");
}

TEST_F(Lifecycle, UpstreamBackendTerminatedMidQuery) {
  RawConn admin = direct_admin();
  RawConn c = proxy_.connect();
  auto s = c.startup(default_params("ptest-terminated-busy"));
  ASSERT_TRUE(s.ok);
  uint32_t pid = c.backend_pid(s);
  ASSERT_TRUE(c.send(msg::query("SELECT pg_sleep(30)")));
  ASSERT_TRUE(wait_backend_state(admin, pid, "active", 10000ms));
  auto r = admin.simple_query("SELECT pg_terminate_backend(" + std::to_string(pid) + ")");
  ASSERT_TRUE(r.complete && !r.error);
  expect_terminated(c, "mid-query");
  expect_serves_normal_session(proxy_, "after a backend terminated mid-query");
}

TEST(Drain, SigtermDrainsIdleSessionThenExitsZero) {
  PredropProcess p;
  PTEST_START(p, PredropOptions::with_config("limits:\n  drain_timeout_ms: 1500\n"));
  RawConn idle = p.connect();
  ASSERT_TRUE(idle.startup(default_params("ptest-drain")).ok);
  // A session still in startup when the signal comes.
  RawConn half = p.connect();
  ASSERT_TRUE(half.send(msg::u32(8)));

  auto t0 = Clock::now();
  p.signal(SIGTERM);
  // Connections racing the signal may still be served; once predrop has logged that it drains,
  // none may be: each is refused (listener closed) or answered 57P03.
  while (p.log().find("draining") == std::string::npos && ms_since(t0) < 5000) std::this_thread::sleep_for(10ms);
  ASSERT_NE(p.log().find("draining"), std::string::npos) << "no drain announced 5 s after SIGTERM:\n" << p.log();
  auto t_drain = Clock::now();
  bool refused = false;
  while (ms_since(t_drain) < 1000) {
    RawConn n;
    if (!n.connect("127.0.0.1", p.port(), 500ms)) {
      refused = true;
      break;
    }
    // Accepted just before the listener closed: it must not become a session.
    n.send(msg::startup(default_params("ptest-drain-late")));
    auto m = n.read_message(3000ms);
    if (m) {
      EXPECT_EQ(m->type, 'E') << "a connection made after the drain began was served: " << m->describe();
      if (m->type == 'E') {
        EXPECT_EQ(parse_error(*m).sqlstate, "57P03");
      }
    }
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_TRUE(refused) << "predrop still accepts connections 1 s after the drain began";

  // The idle session keeps working during the drain...
  auto q = idle.simple_query("SELECT 'during drain'", 1000ms);
  EXPECT_TRUE(q.complete && !q.error) << "session unusable during the drain";

  // ...then gets 57P01 when the drain timeout passes, and the connection closes.
  auto m = idle.read_message(10000ms);
  auto ms = ms_since(t0);
  ASSERT_TRUE(m.has_value()) << "idle session got nothing (" << (idle.eof() ? "closed" : "timeout") << ")";
  ASSERT_EQ(m->type, 'E') << m->describe();
  auto e = parse_error(*m);
  EXPECT_EQ(e.sqlstate, "57P01") << e.message;
  EXPECT_EQ(e.severity, "FATAL");
  EXPECT_TRUE(idle.wait_closed(5000ms));
  EXPECT_GE(ms, 1200) << "idle session closed before limits.drain_timeout_ms (1500) passed";
  EXPECT_LT(ms, 10000);
  std::cout << "idle session ended " << ms << " ms after SIGTERM (drain_timeout_ms 1500)\n";

  auto code = p.wait_exit(10000ms);
  ASSERT_TRUE(code.has_value()) << "predrop still running 10 s after the drain";
  EXPECT_EQ(*code, 0) << p.log();
  EXPECT_TRUE(half.wait_closed(1000ms));
}

TEST(Drain, SigtermWithoutSessionsExitsPromptly) {
  PredropProcess p;
  PTEST_START(p, PredropOptions::with_config("limits:\n  drain_timeout_ms: 20000\n"));
  auto t0 = Clock::now();
  auto code = p.stop(10000ms);
  ASSERT_TRUE(code.has_value()) << "predrop did not exit on SIGTERM";
  EXPECT_EQ(*code, 0);
  EXPECT_LT(ms_since(t0), 10000);
}

TEST(Drain, SessionEndingDuringDrainLetsPredropExitEarly) {
  PredropProcess p;
  PTEST_START(p, PredropOptions::with_config("limits:\n  drain_timeout_ms: 30000\n"));
  RawConn c = p.connect();
  ASSERT_TRUE(c.startup(default_params("ptest-drain-early")).ok);
  auto t0 = Clock::now();
  p.signal(SIGTERM);
  std::this_thread::sleep_for(300ms);
  EXPECT_TRUE(c.simple_query("SELECT 1").complete);
  c.send(msg::terminate());
  EXPECT_TRUE(c.wait_closed());
  auto code = p.wait_exit(10000ms);
  ASSERT_TRUE(code.has_value()) << "predrop waited for a drain with no sessions left";
  EXPECT_EQ(*code, 0);
  EXPECT_LT(ms_since(t0), 10000);
}

}  // namespace
}  // namespace ptest
