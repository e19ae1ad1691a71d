// Ledger statements for the store (row inserts, hold and outcome updates), on the event-loop
// thread, each on a pooled store connection. Two bounded queues keep them while the store cannot
// take them:
// - the retry queue: statements the store could not take because it was unreachable, kept in order
//   and retried one at a time with backoff, so a brief outage loses no ledger row. Past
//   store_retry_max the oldest is dropped (predrop_store_retry_queue, predrop_store_retry_lost_total).
// - the waiters: updates of a ledger row whose INSERT is still on its way (a hold_ms update run on
//   another store connection could otherwise overtake the INSERT). Past store_waiters_max a new one
//   is dropped and counted as lost with the retry queue's: the oldest are the nearest to their turn.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "capture/capture.hpp"
#include "capture/capture_counters.hpp"
#include "capture/conn_pool.hpp"
#include "capture/store_health.hpp"
#include "capture/store_writer.hpp"

namespace predrop::capture {

class LedgerWriter {
 public:
  using MakeQuery = std::function<BatchQuery(const StoreSql&)>;
  // The store's SQL, built once the first store connection can quote the table names.
  using SqlFor = std::function<const StoreSql&(PgConn&)>;

  // cfg is the service's, read on the event-loop thread (store_retry_max, store_waiters_max, actor).
  LedgerWriter(boost::asio::io_context& io, ConnPool& store_pool, const CaptureConfig& cfg, StoreHealth& health,
               CaptureCounters& counters, const std::atomic<bool>& stopped, SqlFor sql_for);

  // Sends one statement; `answered` gets the store's answer when it succeeded, then `after` runs
  // once it was sent and answered, or given up.
  void exec(MakeQuery make, std::string what, std::function<void()> after = nullptr,
            std::function<void(const PgResult&)> answered = nullptr);
  // Ledger rows of a request that wrote no snapshot (a failure) or of a statement that never
  // reached a capture.
  void write_events(std::vector<WriteRow> rows, StatementContext ctx, SnapshotReason reason, std::optional<double> hold_ms,
                    double capture_ms);
  // Runs fn now, or once the INSERT of any of these ledger rows has finished.
  void after_insert(const std::vector<std::string>& event_ids, std::function<void()> fn);
  // Statements sent and not yet answered (the retry queue aside).
  size_t in_flight() const { return sent_; }
  // Stopping: no more retries; what is still queued is named in the log.
  void shutdown();

 private:
  struct Statement {
    MakeQuery make;
    std::string what;
    std::function<void()> after;
    std::function<void(const PgResult&)> answered;
  };
  void send(Statement st, bool retrying);
  void keep_for_retry(Statement st, bool retrying, const std::string& err);
  size_t retry_waiting() const { return retry_.size() + (retry_in_flight_ ? 1 : 0); }
  void arm_retry();
  void retry_next();
  void inserted(const std::vector<std::string>& event_ids);

  ConnPool& store_pool_;
  const CaptureConfig& cfg_;
  StoreHealth& health_;
  CaptureCounters& counters_;
  const std::atomic<bool>& stopped_;
  SqlFor sql_for_;

  std::deque<Statement> retry_;
  boost::asio::steady_timer retry_timer_;
  bool retry_armed_ = false;
  bool retry_in_flight_ = false;  // the queue's front is out being retried (it still counts)
  std::chrono::milliseconds retry_delay_{kRetryFirst};
  static constexpr std::chrono::milliseconds kRetryFirst{250}, kRetryMax{5000};

  // Ledger rows whose INSERT is still on its way, by event id, with the updates waiting for it.
  std::unordered_map<std::string, std::vector<std::function<void()>>> in_flight_;
  size_t waiters_ = 0;
  size_t sent_ = 0;
};

}  // namespace predrop::capture
