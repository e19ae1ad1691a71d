// A bounded set of PgConn, keyed by database: never more than max_total connections open or
// opening, all keys together. A request for a database with no idle connection opens one if
// there is room, else closes an idle connection of another database, else waits in FIFO order.
// Idle connections are handed out the last released first (pump).
// Runs on the io_context's thread only.
#pragma once

#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "capture/pg_async.hpp"

namespace predrop::capture {

class ConnPool {
 public:
  using Conn = std::shared_ptr<PgConn>;
  // conn is null and error set when the connection could not be opened.
  using AcquireFn = std::function<void(Conn conn, std::string error)>;
  // Builds the connection parameters for a key (the database name).
  using ParamsFn = std::function<ConnectParams(const std::string& key)>;

  // idle_close: a connection idle this long is closed (0: kept until the pool closes), so that a
  // fleet of sidecars holds connections only while it captures (deploy/README.md, sizing).
  ConnPool(boost::asio::io_context& io, int max_total, ParamsFn params, std::string what,
           std::chrono::seconds idle_close = std::chrono::seconds(0));

  // Returns a ticket for cancel(). The callback runs later, never inside acquire().
  // background: served after every waiting request that is not (a hold must not queue behind afters).
  uint64_t acquire(const std::string& key, AcquireFn fn, bool background = false);
  // Forgets a waiting request (its callback will not run). No effect once it was served.
  void cancel(uint64_t ticket);
  // Gives a connection back; reusable=false closes it (after an error or a kill).
  void release(Conn conn, bool reusable);
  void close_all();

  size_t idle() const { return idle_.size(); }
  size_t busy() const { return open_ - idle_.size(); }
  size_t queued() const { return waiters_.size(); }
  uint64_t opened() const { return opened_; }

 private:
  struct Waiter {
    uint64_t ticket;
    std::string key;
    AcquireFn fn;
    bool background = false;
  };
  void pump();
  void open_for(Waiter w);

  boost::asio::io_context& io_;
  int max_total_;
  ParamsFn params_;
  std::string what_;
  std::deque<Waiter> waiters_;
  std::vector<Conn> idle_;
  // When each idle connection went idle (same order as idle_).
  std::vector<std::chrono::steady_clock::time_point> idle_since_;
  void close_idle();
  void arm_idle_close();
  std::chrono::seconds idle_close_{0};
  std::unique_ptr<boost::asio::steady_timer> idle_timer_;
  bool idle_timer_armed_ = false;
  // Every connection still opening, by its waiter's ticket; a cancelled waiter's fn is empty and
  // its connection goes idle. The completion handler holds the attempt and the connection holds
  // the handler until the attempt ends, so close_all() must end it or it is never freed.
  struct Attempt {
    Conn conn;
    std::shared_ptr<boost::asio::steady_timer> timer;
    Waiter waiter;
  };
  std::unordered_map<uint64_t, std::shared_ptr<Attempt>> connecting_;
  size_t open_ = 0;  // connections open or opening, busy or idle
  uint64_t next_ticket_ = 1;
  uint64_t opened_ = 0;
  bool closed_ = false;
  std::chrono::milliseconds connect_timeout_{10000};
};

}  // namespace predrop::capture
