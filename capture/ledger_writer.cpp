#include "capture/ledger_writer.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace predrop::capture {

LedgerWriter::LedgerWriter(boost::asio::io_context& io, ConnPool& store_pool, const CaptureConfig& cfg,
                           StoreHealth& health, CaptureCounters& counters, const std::atomic<bool>& stopped,
                           SqlFor sql_for)
    : store_pool_(store_pool),
      cfg_(cfg),
      health_(health),
      counters_(counters),
      stopped_(stopped),
      sql_for_(std::move(sql_for)),
      retry_timer_(io) {}

void LedgerWriter::exec(MakeQuery make, std::string what, std::function<void()> after,
                        std::function<void(const PgResult&)> answered) {
  send(Statement{std::move(make), std::move(what), std::move(after), std::move(answered)}, false);
}

void LedgerWriter::send(Statement st, bool retrying) {
  ++sent_;
  store_pool_.acquire("", [this, st = std::move(st), retrying](ConnPool::Conn conn, std::string err) mutable {
    if (!conn) {
      --sent_;
      health_.note(false, err);
      return keep_for_retry(std::move(st), retrying, err);
    }
    const StoreSql& sql = sql_for_(*conn);
    ++counters_.store;
    BatchQuery q = st.make(sql);
    auto on_done = [this, conn, st, retrying](PgResult r) {
      --sent_;
      // A statement error is the store's answer; a connection that died under it is an outage.
      bool lost = !r.ok() && !conn->healthy();
      store_pool_.release(conn, !lost);
      if (!r.ok()) health_.note(false, r.error);
      if (lost) return keep_for_retry(st, retrying, r.error);
      if (!r.ok()) spdlog::warn("predrop {} failed: {}", st.what, r.error);
      if (r.ok() && st.answered) st.answered(r);
      if (st.after) st.after();
      if (retrying) {
        retry_in_flight_ = false;
        retry_delay_ = kRetryFirst;
        retry_next();
      }
    };
    if (q.name) conn->exec_prepared(q.name, q.sql, q.params, std::move(on_done), q.plan);
    else conn->exec(q.sql, q.params, std::move(on_done));
  });
}

void LedgerWriter::keep_for_retry(Statement st, bool retrying, const std::string& err) {
  if (stopped_) {
    spdlog::warn("predrop {}: store unavailable while stopping, not written: {}", st.what, err);
    if (st.after) st.after();
    return;
  }
  if (retrying) {
    retry_in_flight_ = false;
    retry_.push_front(std::move(st));
    retry_delay_ = std::min(retry_delay_ * 2, kRetryMax);
  } else {
    if (retry_waiting() >= static_cast<size_t>(std::max(cfg_.store_retry_max, 0))) {
      ++counters_.retry_lost;
      if (retry_.empty()) {
        spdlog::error("predrop {} lost: store unavailable and no retry queue: {}", st.what, err);
        if (st.after) st.after();
        return;
      }
      spdlog::error("predrop store retry queue full ({}): oldest {} lost", retry_.size(), retry_.front().what);
      if (auto after = std::move(retry_.front().after)) after();
      retry_.pop_front();
    }
    spdlog::warn("predrop {}: store unavailable, kept for retry ({} waiting): {}", st.what, retry_waiting() + 1, err);
    retry_.push_back(std::move(st));
  }
  counters_.retry_queued = retry_waiting();
  arm_retry();
}

void LedgerWriter::arm_retry() {
  if (retry_armed_ || retry_in_flight_ || retry_.empty() || stopped_) return;
  retry_armed_ = true;
  retry_timer_.expires_after(retry_delay_);
  retry_timer_.async_wait([this](const boost::system::error_code& ec) {
    retry_armed_ = false;
    if (!ec) retry_next();
  });
}

void LedgerWriter::retry_next() {
  counters_.retry_queued = retry_waiting();
  if (retry_in_flight_ || retry_.empty() || stopped_) return;
  auto st = std::move(retry_.front());
  retry_.pop_front();
  retry_in_flight_ = true;
  send(std::move(st), true);
}

void LedgerWriter::after_insert(const std::vector<std::string>& event_ids, std::function<void()> fn) {
  for (const auto& id : event_ids)
    if (auto it = in_flight_.find(id); it != in_flight_.end()) {
      if (waiters_ >= static_cast<size_t>(std::max(cfg_.store_waiters_max, 0))) {
        ++counters_.retry_lost;
        spdlog::error("predrop store waiters full ({}): an update of ledger row {} lost", waiters_, id);
        return;
      }
      it->second.push_back(std::move(fn));
      counters_.waiting_updates = ++waiters_;
      return;
    }
  fn();
}

void LedgerWriter::write_events(std::vector<WriteRow> rows, StatementContext ctx, SnapshotReason reason,
                                std::optional<double> hold_ms, double capture_ms) {
  if (rows.empty()) return;
  std::vector<std::string> ids;
  for (const auto& r : rows) {
    ids.push_back(r.event_id);
    in_flight_[r.event_id];
  }
  exec(
      [this, rows = std::move(rows), ctx = std::move(ctx), reason, hold_ms,
       capture_ms](const StoreSql& sql) {
        return BatchQuery{"predrop_events_v1", sql.events, events_params(rows, ctx, cfg_, reason, hold_ms, capture_ms)};
      },
      "ledger write", [this, ids = std::move(ids)] { inserted(ids); });
}

void LedgerWriter::inserted(const std::vector<std::string>& event_ids) {
  std::vector<std::function<void()>> waiting;
  for (const auto& id : event_ids) {
    auto it = in_flight_.find(id);
    if (it == in_flight_.end()) continue;
    for (auto& fn : it->second) waiting.push_back(std::move(fn));
    in_flight_.erase(it);
  }
  waiters_ -= waiting.size();
  counters_.waiting_updates = waiters_;
  for (auto& fn : waiting) fn();
}

void LedgerWriter::shutdown() {
  retry_timer_.cancel();
  if (!retry_.empty())
    spdlog::error("predrop stopping with {} ledger statement(s) the store never took", retry_.size());
}

}  // namespace predrop::capture
