// Thousands of sessions opened and killed in every phase; predrop's descriptors must return to
// the baseline and its memory must not grow without bound. Upstream backends must not linger.
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "proxy_test_util.hpp"

namespace ptest {
namespace {

using Clock = std::chrono::steady_clock;

enum class Kind { full_startup_reset, half_startup, mid_query_kill, partial_large_message, connect_only };

struct Counters {
  std::atomic<int> ok{0};
  std::atomic<int> failed{0};
  std::mutex mu;
  std::string first_failure;
  void fail(const std::string& why) {
    if (failed.fetch_add(1) == 0) {
      std::lock_guard lk(mu);
      first_failure = why;
    }
  }
};

void one_session(uint16_t port, Kind kind, int i, Counters& out) {
  RawConn c;
  if (!c.connect("127.0.0.1", port, 5000ms)) return out.fail("connect: " + c.last_error());
  auto params = default_params("ptest-leak");
  switch (kind) {
    case Kind::connect_only:
      if (i % 2) c.abort();
      else c.close();
      break;
    case Kind::half_startup: {
      std::string pkt = msg::startup(params);
      c.send(std::string_view(pkt).substr(0, 1 + (i % (pkt.size() - 1))));
      if (i % 2) c.abort();
      else c.close();
      break;
    }
    case Kind::full_startup_reset: {
      auto s = c.startup(params, 15000ms);
      if (!s.ok) return out.fail("startup: " + (s.error ? s.error->sqlstate + " " + s.error->message : c.last_error()));
      c.abort();
      break;
    }
    case Kind::mid_query_kill: {
      params.emplace_back("options", "-c client_connection_check_interval=100");
      auto s = c.startup(params, 15000ms);
      if (!s.ok) return out.fail("startup: " + (s.error ? s.error->sqlstate + " " + s.error->message : c.last_error()));
      c.send(msg::query("SELECT pg_sleep(0.5)"));
      if (i % 3 == 0) std::this_thread::sleep_for(5ms);
      c.abort();
      break;
    }
    case Kind::partial_large_message: {
      auto s = c.startup(params, 15000ms);
      if (!s.ok) return out.fail("startup: " + (s.error ? s.error->sqlstate + " " + s.error->message : c.last_error()));
      // Half of a 200 KB Parse: predrop is assembling it in an oversized buffer when the client goes.
      std::string big = msg::parse("", "SELECT '" + std::string(200 * 1024, 'L') + "'");
      c.send(std::string_view(big).substr(0, big.size() / 2));
      c.abort();
      break;
    }
  }
  out.ok.fetch_add(1);
}

Kind kind_for(int i) {
  // A third each of full startups and half-sent startups, the rest killed mid-query or mid-message.
  switch (i % 6) {
    case 0: case 1: return Kind::full_startup_reset;
    case 2: return Kind::half_startup;
    case 3: return i % 4 == 3 ? Kind::connect_only : Kind::half_startup;
    case 4: return Kind::mid_query_kill;
    default: return Kind::partial_large_message;
  }
}

void run_batch(uint16_t port, int first, int count, int threads, Counters& out) {
  std::atomic<int> next{first};
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&] {
      for (int i; (i = next.fetch_add(1)) < first + count;) one_session(port, kind_for(i), i, out);
    });
  }
  for (auto& t : ts) t.join();
}

int leftover_backends(RawConn& admin) {
  auto q = admin.simple_query("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'ptest-leak'");
  if (!q.complete || q.error || q.rows.empty()) return -1;
  return std::atoi(q.rows[0][0].value_or("-1").c_str());
}

TEST(Leak, ThreeThousandKilledSessionsReturnFdsAndMemory) {
  PredropProcess p;
  PTEST_START(p);
  const uint16_t port = p.port();
  const int kThreads = 12;

  // Warm up: thread arenas, buffer pools, the parse cache.
  Counters warm;
  run_batch(port, 0, 240, kThreads, warm);
  ASSERT_EQ(warm.failed.load(), 0) << warm.first_failure;
  RawConn admin = direct_admin();
  auto settle = [&](int target_fds) {
    auto t0 = Clock::now();
    while (Clock::now() - t0 < 8s) {
      if (p.fd_count() <= target_fds && leftover_backends(admin) == 0) break;
      std::this_thread::sleep_for(100ms);
    }
    std::this_thread::sleep_for(300ms);
  };
  settle(1000000);
  ASSERT_TRUE(p.running()) << "predrop " << p.status() << " during the warm-up; log tail:\n"
                           << p.log().substr(p.log().size() > 4000 ? p.log().size() - 4000 : 0);
  int fd0 = p.fd_count();
  long rss0 = p.rss_kb();
  ASSERT_GT(fd0, 0);
  ASSERT_GT(rss0, 0);

  // Watch the descriptor count during the run: proof that the measurement sees the sessions.
  std::atomic<bool> running{true};
  std::atomic<int> peak_fds{0};
  std::thread monitor([&] {
    while (running) {
      int n = p.fd_count();
      if (n > peak_fds) peak_fds = n;
      std::this_thread::sleep_for(20ms);
    }
  });
  Counters main;
  auto t0 = Clock::now();
#if defined(__SANITIZE_ADDRESS__)
  // Under ASan the RSS bound is not checked (below) and LeakSanitizer finds a leaking path in 1,000
  // sessions as surely as in 3,000: a third of the run, in the phase that is slowest.
  const int kTotal = 1000, kBatch = 500;
#else
  const int kTotal = 3000, kBatch = 500;
#endif
  for (int b = 0; b < kTotal / kBatch; ++b) {
    run_batch(port, 1000 + b * kBatch, kBatch, kThreads, main);
    if (!p.running()) {
      running = false;
      monitor.join();
      FAIL() << "predrop " << p.status() << " during batch " << b << "; log tail:\n"
             << p.log().substr(p.log().size() > 4000 ? p.log().size() - 4000 : 0);
    }
  }
  running = false;
  monitor.join();
  auto secs = std::chrono::duration<double>(Clock::now() - t0).count();
  settle(fd0 + 2);
  int fd1 = p.fd_count();
  long rss1 = p.rss_kb();
  int left = leftover_backends(admin);
  std::cout << "leak test: " << main.ok.load() << " sessions in " << secs << " s; fds " << fd0 << " -> " << fd1
            << " (peak " << peak_fds.load() << "); VmRSS " << rss0 << " kB -> " << rss1 << " kB (" << (rss1 - rss0) << " kB); leftover backends " << left
            << "\n";
  EXPECT_EQ(main.failed.load(), 0) << main.first_failure;
  EXPECT_GT(peak_fds.load(), fd0 + 4) << "the fd count never rose during the run: is /proc/" << p.pid() << "/fd readable?";
  EXPECT_LE(fd1, fd0 + 3) << "descriptors leaked: " << fd0 << " before, " << fd1 << " after";
#if defined(__SANITIZE_ADDRESS__)
  // ASan keeps freed memory in quarantine, so RSS says nothing here; LeakSanitizer checks at exit.
  std::cout << "leak test: RSS bound not checked under AddressSanitizer\n";
#else
  EXPECT_LT(rss1 - rss0, 20 * 1024) << "VmRSS grew by " << (rss1 - rss0) << " kB";
#endif
  EXPECT_EQ(left, 0) << "upstream backends of killed sessions still connected";
  expect_serves_normal_session(p, "after " + std::to_string(kTotal) + " killed sessions");
  auto code = p.stop();
  ASSERT_TRUE(code.has_value()) << "predrop did not stop on SIGTERM";
  EXPECT_EQ(*code, 0);
}

}  // namespace
}  // namespace ptest
