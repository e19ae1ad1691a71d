#include "capture/pg_async.hpp"

#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <thread>

namespace predrop::capture {

namespace asio = boost::asio;

namespace {
// PQcancel blocks (it opens a connection of its own), so it runs on a helper thread; never more
// than this many at once, so a storm of timeouts cannot spawn unbounded threads.
constexpr int kMaxCancelThreads = 4;
std::atomic<int> cancel_threads{0};

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}
}  // namespace

PgConn::PgConn(asio::io_context& io, std::string key) : io_(io), key_(std::move(key)) {}

PgConn::~PgConn() { close(); }

void PgConn::close() {
  ++generation_;
  done_ = nullptr;
  forget_socket();
  if (conn_) {
    PQfinish(conn_);
    conn_ = nullptr;
  }
}

void PgConn::forget_socket() {
  // The descriptor belongs to libpq: stop waiting on it and hand it back (PQfinish closes it).
  if (sd_) {
    boost::system::error_code ec;
    sd_->cancel(ec);
    sd_->release();
    sd_.reset();
  }
  fd_ = -1;
}

void PgConn::sync_socket() {
  // libpq may open a new socket while connecting (another host address, SSL fallback).
  int fd = conn_ ? PQsocket(conn_) : -1;
  if (fd == fd_) return;
  forget_socket();
  fd_ = fd;
  if (fd >= 0) sd_.emplace(io_, fd);
}

void PgConn::connect(const ConnectParams& params, DoneFn done) {
  done_ = std::move(done);
  auto keys = params.key_ptrs();
  auto values = params.value_ptrs();
  conn_ = PQconnectStartParams(keys.data(), values.data(), 1);
  if (!conn_ || PQstatus(conn_) == CONNECTION_BAD) {
    fail(conn_ ? PQerrorMessage(conn_) : "out of memory");
    return;
  }
  // Libpq's protocol: behave as if PQconnectPoll had last returned PGRES_POLLING_WRITING.
  poll_connect(PGRES_POLLING_WRITING);
}

void PgConn::poll_connect(PostgresPollingStatusType st) {
  // libpq may close its socket and open another that gets the same number (sslmode=prefer
  // retrying without TLS after the server refused the login): register afresh at every step, or
  // the wait stays on the closed socket until the connect timeout.
  forget_socket();
  sync_socket();
  if (st == PGRES_POLLING_OK) {
    PQsetnonblocking(conn_, 1);
    finish(PgResult{std::shared_ptr<PGresult>(PQmakeEmptyPGresult(conn_, PGRES_COMMAND_OK), PQclear), ""});
    return;
  }
  if (st == PGRES_POLLING_FAILED || !sd_) {
    fail(PQerrorMessage(conn_));
    return;
  }
  auto self = shared_from_this();
  auto gen = generation_;
  auto wait = st == PGRES_POLLING_READING ? asio::posix::stream_descriptor::wait_read
                                          : asio::posix::stream_descriptor::wait_write;
  sd_->async_wait(wait, [self, gen](const boost::system::error_code& ec) {
    if (gen != self->generation_ || !self->conn_) return;
    if (ec) return self->fail("connection wait: " + ec.message());
    self->poll_connect(PQconnectPoll(self->conn_));
  });
}

void PgConn::exec(const std::string& sql, const Params& params, DoneFn done) {
  std::vector<const char*> values;
  for (const auto& p : params) values.push_back(p ? p->c_str() : nullptr);
  done_ = std::move(done);
  pending_ = {};
  if (!PQsendQueryParams(conn_, sql.c_str(), static_cast<int>(values.size()), nullptr, values.data(), nullptr,
                         nullptr, 0))
    return fail(PQerrorMessage(conn_));
  flush();
}

// The server keeps a prepared statement's generic plan from its sixth execution on, planned
// against the tables as they were then. The store starts empty and grows by a row or two a DROP,
// and autovacuum may never analyse it (the plan cache is renewed only then): a plan made on an
// empty store joins it by a sequential scan, and kept that way it cost 5 ms a call at 2,000 rows
// (issue 21). Preparing again on a schedule that thins out as the store grows lets the plan follow
// the store's size whether or not it was analysed, at one extra round trip per preparation.
// Only the background updates ask for it: the hold's own write reads the store through correlated
// index lookups whatever its size, and prepared again on a grown store the server keeps planning
// it afresh every time (its custom plans, cut down to the rows at hand, look cheaper than the
// generic one): 0.3 ms more on every hold.
bool replan_due(uint64_t executions) {
  // Early and often while a new store fills (a pool's connections share its writes), then rarely.
  for (uint64_t due = 16; due <= 4096; due *= 4)
    if (executions == due) return true;
  return executions > 0 && executions % 16384 == 0;
}

void PgConn::exec_prepared(const std::string& name, const std::string& sql, const Params& params, DoneFn done,
                           Plan plan) {
  auto it = prepared_.find(name);
  if (plan == Plan::follows_growth && it != prepared_.end() && replan_due(it->second)) {
    prepared_.erase(it);
    done_ = [self = shared_from_this(), name, sql, params, done = std::move(done), plan](PgResult r) mutable {
      if (!r.ok()) return done(std::move(r));
      self->exec_prepared(name, sql, params, std::move(done), plan);
    };
    pending_ = {};
    const std::string deallocate = "DEALLOCATE " + quote_ident(name);
    if (!PQsendQueryParams(conn_, deallocate.c_str(), 0, nullptr, nullptr, nullptr, nullptr, 0))
      return fail(PQerrorMessage(conn_));
    flush();
    return;
  }
  if (it != prepared_.end()) {
    ++it->second;
    std::vector<const char*> values;
    for (const auto& p : params) values.push_back(p ? p->c_str() : nullptr);
    done_ = std::move(done);
    pending_ = {};
    if (!PQsendQueryPrepared(conn_, name.c_str(), static_cast<int>(values.size()), values.data(), nullptr, nullptr, 0))
      return fail(PQerrorMessage(conn_));
    flush();
    return;
  }
  // First use on this connection: prepare (one extra round trip, once), then execute.
  done_ = [self = shared_from_this(), name, sql, params, done = std::move(done), plan](PgResult r) mutable {
    if (!r.ok()) return done(std::move(r));
    self->prepared_.emplace(name, 0);
    self->exec_prepared(name, sql, params, std::move(done), plan);
  };
  pending_ = {};
  if (!PQsendPrepare(conn_, name.c_str(), sql.c_str(), 0, nullptr)) return fail(PQerrorMessage(conn_));
  flush();
}

void PgConn::flush() {
  int r = PQflush(conn_);
  if (r < 0) return fail(PQerrorMessage(conn_));
  if (r == 0) return wait_readable();
  // More to send: wait until writable. Libpq also wants input consumed meanwhile, which
  // PQflush does itself when the socket is read-ready.
  auto self = shared_from_this();
  auto gen = generation_;
  sd_->async_wait(asio::posix::stream_descriptor::wait_write, [self, gen](const boost::system::error_code& ec) {
    if (gen != self->generation_ || !self->conn_) return;
    if (ec) return self->fail("write wait: " + ec.message());
    self->flush();
  });
}

void PgConn::wait_readable() {
  auto self = shared_from_this();
  auto gen = generation_;
  sd_->async_wait(asio::posix::stream_descriptor::wait_read, [self, gen](const boost::system::error_code& ec) {
    if (gen != self->generation_ || !self->conn_) return;
    if (ec) return self->fail("read wait: " + ec.message());
    self->on_readable();
  });
}

void PgConn::on_readable() {
  if (!PQconsumeInput(conn_)) return fail(PQerrorMessage(conn_));
  while (!PQisBusy(conn_)) {
    PGresult* r = PQgetResult(conn_);
    if (!r) {  // the statement is over
      PgResult out = std::move(pending_);
      if (!out.res && out.error.empty()) out.error = "no result";
      return finish(std::move(out));
    }
    auto st = PQresultStatus(r);
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) {
      if (pending_.error.empty()) pending_.res.reset(r, PQclear);
      else PQclear(r);
    } else {
      // Keep the first error; the statement still has to be drained to its end.
      if (pending_.error.empty()) pending_.error = trimmed(PQresultErrorMessage(r));
      pending_.res.reset();
      PQclear(r);
    }
  }
  wait_readable();
}

void PgConn::finish(PgResult r) {
  ++generation_;
  auto done = std::move(done_);
  done_ = nullptr;
  if (done) done(std::move(r));
}

void PgConn::fail(const std::string& why) {
  PgResult r;
  r.error = trimmed(why.empty() ? "connection failed" : why);
  // A connection that failed mid-statement is unusable; close it so nobody reuses it.
  auto done = std::move(done_);
  close();
  if (done) done(std::move(r));
}

void PgConn::kill() {
  if (conn_ && done_ && PQtransactionStatus(conn_) == PQTRANS_ACTIVE && cancel_threads < kMaxCancelThreads) {
    if (PGcancel* c = PQgetCancel(conn_)) {
      ++cancel_threads;
      std::thread([c] {
        char err[256];
        PQcancel(c, err, sizeof err);
        PQfreeCancel(c);
        --cancel_threads;
      }).detach();
    }
  }
  close();
}

std::string PgConn::quote_ident(const std::string& name) const {
  if (!conn_) return "";
  char* q = PQescapeIdentifier(conn_, name.data(), name.size());
  if (!q) return "";
  std::string out = q;
  PQfreemem(q);
  return out;
}

bool PgConn::healthy() {
  if (!conn_ || PQstatus(conn_) != CONNECTION_OK || done_) return false;
  // Nothing arrived while idle (the usual case, on every pool hand-out): one peek says so, where
  // two reads through libpq cost two system calls (issue 21).
  char byte;
  if (::recv(PQsocket(conn_), &byte, 1, MSG_PEEK | MSG_DONTWAIT) < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
    return PQtransactionStatus(conn_) == PQTRANS_IDLE;
  // Reads whatever arrived while idle (a termination notice, EOF) without blocking.
  if (!PQconsumeInput(conn_)) return false;
  // Over TLS one read may return the server's last message (a FATAL when it shuts down) and only
  // the next one sees the end of the connection.
  if (!PQconsumeInput(conn_)) return false;
  return PQstatus(conn_) == CONNECTION_OK && PQtransactionStatus(conn_) == PQTRANS_IDLE;
}

}  // namespace predrop::capture
