// Shared pieces of the proxy protocol tests.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "predrop_process.hpp"
#include "raw_client.hpp"

namespace ptest {

#define PTEST_REQUIRE_ENV()                                              \
  do {                                                                   \
    if (auto problem_ = ::ptest::env_problem(); !problem_.empty())       \
      FAIL() << "test environment: " << problem_;                        \
  } while (0)

#define PTEST_START(proc, ...)                                                    \
  do {                                                                            \
    PTEST_REQUIRE_ENV();                                                          \
    ASSERT_TRUE((proc).start(__VA_ARGS__)) << "starting predrop: " << (proc).error(); \
  } while (0)

// Replies that legitimately differ between two connections: BackendKeyData contents (pid,
// secret) and the sender pid of NotificationResponse. Everything else must be equal.
inline Message normalise(Message m) {
  if (m.type == 'K') {
    m.body.assign(m.body.size(), '\0');
  } else if (m.type == 'A' && m.body.size() >= 4) {
    m.body.replace(0, 4, 4, '\0');
  }
  return m;
}

// A conversation's server side, message by message, with markers between steps.
struct Transcript {
  std::vector<Message> messages;
  std::vector<std::string> problems;   // timeouts, early EOF: the step where it happened

  void add(std::vector<Message> ms) {
    for (auto& m : ms) messages.push_back(normalise(std::move(m)));
  }
  void marker(const std::string& label) {
    Message m;
    m.type = '#';
    m.body = label;
    messages.push_back(std::move(m));
  }
  size_t bytes() const {
    size_t n = 0;
    for (const auto& m : messages) n += m.body.size() + 5;
    return n;
  }
};

// Plays `send` and reads until `count` messages of type `until` arrived; records a problem otherwise.
inline void step(RawConn& c, Transcript& t, const std::string& label, std::string_view send, char until, int count = 1,
                 Ms timeout = 30000ms) {
  t.marker(label);
  if (!c.is_open()) {
    t.problems.push_back(label + ": no connection");
    return;
  }
  if (!send.empty() && !c.send(send)) t.problems.push_back(label + ": send failed: " + c.last_error());
  bool complete = false;
  t.add(c.read_until(until, count, timeout, &complete));
  if (!complete)
    t.problems.push_back(label + ": did not see " + std::to_string(count) + " '" + std::string(1, until) + "' (" +
                         (c.eof() ? "connection closed: " + c.last_error() : std::string("timeout")) + ")");
}

// Compares two transcripts; an empty string when equal, else where they first differ.
inline std::string diff(const Transcript& direct, const Transcript& proxied) {
  std::ostringstream out;
  for (const auto& p : direct.problems) out << "direct run problem: " << p << "\n";
  for (const auto& p : proxied.problems) out << "proxied run problem: " << p << "\n";
  size_t n = std::min(direct.messages.size(), proxied.messages.size());
  std::string last_marker;
  for (size_t i = 0; i < n; ++i) {
    const auto& a = direct.messages[i];
    const auto& b = proxied.messages[i];
    if (a.type == '#') last_marker = a.body;
    if (a.type != b.type || a.body != b.body) {
      out << "first difference at message " << i << " (step '" << last_marker << "'):\n  direct:  " << a.describe()
          << "\n  proxied: " << b.describe() << "\n";
      if (a.type == b.type && a.body.size() == b.body.size()) {
        size_t k = 0;
        while (k < a.body.size() && a.body[k] == b.body[k]) ++k;
        out << "  same length; bodies differ from byte " << k << "\n";
      }
      break;
    }
  }
  if (direct.messages.size() != proxied.messages.size())
    out << "message counts differ: direct " << direct.messages.size() << ", proxied " << proxied.messages.size()
        << "\n";
  return out.str();
}

// Runs a scenario against PostgreSQL directly and through predrop and expects identical replies.
using Scenario = std::function<Transcript(uint16_t port)>;
inline void expect_same_through_predrop(PredropProcess& p, const Scenario& scenario) {
  Transcript direct = scenario(env().pgport);
  Transcript proxied = scenario(p.port());
  ASSERT_TRUE(direct.problems.empty()) << "the scenario itself is broken (direct to PostgreSQL):\n"
                                       << diff(direct, direct);
  EXPECT_EQ(diff(direct, proxied), "") << "(" << direct.messages.size() << " messages, " << direct.bytes()
                                       << " bytes direct)\npredrop log tail:\n"
                                       << p.log().substr(p.log().size() > 3000 ? p.log().size() - 3000 : 0);
  EXPECT_GT(direct.messages.size(), 1u);
  EXPECT_TRUE(p.running()) << "predrop " << p.status() << " during the test; log:\n" << p.log();
}

// For fixtures: predrop must still be running when the test ends (a crash shows up here).
#define PTEST_EXPECT_ALIVE(proc) \
  EXPECT_TRUE((proc).running()) << "predrop " << (proc).status() << " during the test; log tail:\n" << (proc).log().substr((proc).log().size() > 4000 ? (proc).log().size() - 4000 : 0)

// Names that stay the same in the direct and the proxied run but differ between test processes.
inline std::string per_process(const std::string& prefix) { return prefix + "_" + std::to_string(getpid()); }

// Expects an ErrorResponse with `sqlstate` as the next message and then the connection closed.
inline void expect_error_then_close(RawConn& c, const std::string& sqlstate, Ms timeout = 5000ms,
                                    std::string* message = nullptr) {
  auto m = c.read_message(timeout);
  ASSERT_TRUE(m.has_value()) << "no reply (" << (c.eof() ? "closed: " + c.last_error() : std::string("timeout"))
                             << "), expected ErrorResponse " << sqlstate;
  ASSERT_EQ(m->type, 'E') << "expected ErrorResponse " << sqlstate << ", got " << m->describe();
  auto e = parse_error(*m);
  EXPECT_EQ(e.sqlstate, sqlstate) << "message: " << e.message;
  EXPECT_EQ(e.severity, "FATAL") << "message: " << e.message;
  if (message) *message = e.message;
  EXPECT_TRUE(c.wait_closed(timeout)) << "connection still open after the FATAL error";
}

// Expects the connection closed with nothing sent: the server's answer to a startup it only logs.
inline void expect_silent_close(RawConn& c, Ms timeout = 5000ms) {
  auto m = c.read_message(timeout);
  EXPECT_FALSE(m.has_value()) << "expected the connection closed without a word, got " << m->describe();
  EXPECT_TRUE(c.eof()) << "connection still open: " << c.last_error();
}

// A fresh, normal session through predrop works: startup, SELECT, Terminate.
inline void expect_serves_normal_session(PredropProcess& p, const std::string& context) {
  RawConn c;
  ASSERT_TRUE(c.connect("127.0.0.1", p.port())) << context << ": predrop no longer accepts: " << c.last_error();
  auto s = c.startup(default_params("ptest-after"));
  ASSERT_TRUE(s.ok) << context << ": startup after the bad input failed: "
                    << (s.error ? s.error->sqlstate + " " + s.error->message : c.last_error());
  auto q = c.simple_query("SELECT 40 + 2");
  ASSERT_TRUE(q.complete && !q.error) << context << ": query failed";
  ASSERT_EQ(q.rows.size(), 1u);
  EXPECT_EQ(q.rows[0][0].value_or("NULL"), "42");
  c.send(msg::terminate());
  EXPECT_TRUE(c.wait_closed()) << context << ": Terminate did not close the connection";
}

}  // namespace ptest
