// One libpq connection driven without blocking by a boost::asio event loop: the socket is
// wrapped in a stream_descriptor only to be told when it is readable or writable; libpq does all
// the reading and writing. Everything here runs on the io_context's single thread.
#pragma once

#include <libpq-fe.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "capture/conninfo.hpp"

namespace predrop::capture {

// The outcome of one statement: its result, or the error text.
struct PgResult {
  std::shared_ptr<PGresult> res;  // null on error
  std::string error;
  bool ok() const { return res != nullptr; }
  int rows() const { return res ? PQntuples(res.get()) : 0; }
  int columns() const { return res ? PQnfields(res.get()) : 0; }
  bool is_null(int row, int col) const { return PQgetisnull(res.get(), row, col); }
  std::string text(int row, int col) const { return PQgetvalue(res.get(), row, col); }
  std::optional<std::string> opt(int row, int col) const {
    return is_null(row, col) ? std::nullopt : std::optional<std::string>(text(row, col));
  }
  int column(const char* name) const { return res ? PQfnumber(res.get(), name) : -1; }
};

using Params = std::vector<std::optional<std::string>>;

// A prepared statement's plan: kept for the connection's life, or made again as the tables the
// statement joins grow (the store's background updates: capture/pg_async.cpp, replan_due).
enum class Plan : uint8_t { kept, follows_growth };

class PgConn : public std::enable_shared_from_this<PgConn> {
 public:
  using DoneFn = std::function<void(PgResult)>;

  PgConn(boost::asio::io_context& io, std::string key);
  ~PgConn();
  PgConn(const PgConn&) = delete;
  PgConn& operator=(const PgConn&) = delete;

  // Starts connecting; done gets an ok result (empty) or the error.
  void connect(const ConnectParams& params, DoneFn done);
  // One statement with text parameters (extended protocol, unnamed statement).
  void exec(const std::string& sql, const Params& params, DoneFn done);
  // The same through a named prepared statement, prepared on this connection the first time, and
  // with Plan::follows_growth again on replan_due's schedule (see pg_async.cpp).
  void exec_prepared(const std::string& name, const std::string& sql, const Params& params, DoneFn done,
                     Plan plan = Plan::kept);

  // Abandons whatever is running: asks the server to cancel it (on a short-lived helper thread,
  // because PQcancel blocks) and closes the connection. The pending callback is never called.
  void kill();
  // Nonblocking check, for reusing an idle connection: has the server gone away meanwhile?
  bool healthy();
  bool busy() const { return static_cast<bool>(done_); }
  // PQescapeIdentifier on this connection (encoding-aware); empty when not connected.
  std::string quote_ident(const std::string& name) const;
  const std::string& key() const { return key_; }  // the database (or store) it belongs to
  // What a caller did once in this session (the quarantine's prepare): a new session does it
  // again, because the database behind a name may have been dropped and made again since.
  bool done_in_session(const std::string& what) const { return done_in_session_.count(what) > 0; }
  void note_done_in_session(const std::string& what) { done_in_session_.insert(what); }

 private:
  void close();
  void forget_socket();
  void sync_socket();
  void poll_connect(PostgresPollingStatusType st);
  void flush();
  void wait_readable();
  void on_readable();
  void finish(PgResult r);
  void fail(const std::string& why);

  boost::asio::io_context& io_;
  std::string key_;
  PGconn* conn_ = nullptr;
  std::optional<boost::asio::posix::stream_descriptor> sd_;
  int fd_ = -1;
  DoneFn done_;
  PgResult pending_;           // the result to report once PQgetResult says the statement is over
  uint64_t generation_ = 0;    // bumped on finish/kill so stale wake-ups do nothing
  std::map<std::string, uint64_t> prepared_;  // name -> executions since it was prepared
  std::set<std::string> done_in_session_;
};

// Whether a statement executed this many times since its preparation is prepared again first:
// after 16, 64, 256, 1,024 and 4,096 executions, then every 16,384.
bool replan_due(uint64_t executions);

}  // namespace predrop::capture
