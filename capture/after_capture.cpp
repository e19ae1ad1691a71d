#include "capture/after_capture.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/post.hpp>

#include "capture/store_writer.hpp"
#include "quarantine/move_sql.hpp"

namespace predrop::capture {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

AfterCapture::AfterCapture(asio::io_context& io, const CaptureConfig& cfg, SnapshotPipeline& pipeline,
                           ConnPool& capture_pool, LedgerWriter& ledger, Announcer& announcer,
                           CaptureCounters& counters, std::function<void()> want_window)
    : cfg_(cfg),
      pipeline_(pipeline),
      capture_pool_(capture_pool),
      ledger_(ledger),
      announcer_(announcer),
      counters_(counters),
      delay_timer_(io),
      poll_timer_(io),
      want_window_(std::move(want_window)) {}

void AfterCapture::submit(SnapshotRequest request) {
  if (stopped_) return;
  if (queue_.size() >= cfg_.after_queue_max) {
    // The ledger says which change has no after, and why.
    ++counters_.afters_lost;
    std::vector<WriteRow> rows;
    for (const auto& t : request.targets)
      rows.push_back({"", new_uuid(), t.schema, t.name, std::nullopt, SnapshotOutcome::capture_error,
                      "after queue full (" + std::to_string(cfg_.after_queue_max) + " waiting)", nullptr, {}, {}});
    ledger_.write_events(std::move(rows), request.ctx, request.reason, std::nullopt, 0);
    return;
  }
  request.background = true;
  queue_.push_back({std::move(request), Clock::now() + cfg_.after_delay});
  publish();
  pump();
}

namespace {

// Whether a hold's before of `t` (in `database`, for client session `session`) is the shape an
// after's target waits to read. By name: a qualified name is that table whichever session drops
// it; an unqualified one is when the same session holds it, or when the table held is in a schema
// of the after's search_path (where its CREATE put it). With afters waiting cfg.after_delay, a
// table recreated by a worker and dropped by another (a cleanup task, a psql session) is read once,
// by the DROP's before.
bool before_is_after_of(const SnapshotRequest& r, const TargetSpec& target, uint64_t session, const TableResult& t) {
  if (target.kind == TargetKind::after_by_oid) return target.oid == t.oid;
  if (target.name != t.table) return false;
  if (!target.schema.empty()) return target.schema == t.schema;
  return (session != 0 && r.session == session) ||
         std::find(r.search_path.begin(), r.search_path.end(), t.schema) != r.search_path.end();
}

bool absorbable(const TableResult& t) {
  return !t.snapshot_id.empty() && (t.outcome == SnapshotOutcome::written || t.outcome == SnapshotOutcome::deduplicated);
}

}  // namespace

void AfterCapture::absorb(const std::string& database, uint64_t session, const SnapshotResult& result) {
  if (stopped_ || (queue_.empty() && running_.empty())) return;
  for (const auto& t : result.tables) {
    if (!absorbable(t)) continue;
    for (auto q = queue_.begin(); q != queue_.end();) {
      SnapshotRequest* r = &q->request;
      if (r->ctx.database != database || r->reason == SnapshotReason::post_analyze) {
        ++q;
        continue;
      }
      auto& targets = r->targets;
      for (auto it = targets.begin(); it != targets.end();) {
        if (!before_is_after_of(*r, *it, session, t)) {
          ++it;
          continue;
        }
        ++counters_.afters_absorbed;
        ++counters_.afters_written;
        copies_.push_back({t.snapshot_id, r->reason, it->pair_hint, r->ctx});
        it = targets.erase(it);
      }
      q = targets.empty() ? queue_.erase(q) : std::next(q);
    }
    // An after already being read when the hold's before was written: if it finds its table gone
    // (the held DROP committed first), done() writes it as a copy of this before; if not, its
    // write dates it just before this before (SnapshotRequest::befores_meanwhile).
    for (const SnapshotRequest& r : running_) {
      if (r.ctx.database != database || r.reason == SnapshotReason::post_analyze) continue;
      auto& befores = *r.befores_meanwhile;
      for (size_t i = 0; i < r.targets.size(); ++i)
        if (befores[i].empty() && before_is_after_of(r, r.targets[i], session, t)) befores[i] = t.snapshot_id;
    }
  }
  want_copies();
  publish();
}

// The copies wait for the service's window rather than a timer of their own: one wake-up a window
// for everything the capture thread does off the client's path (issue 21).
void AfterCapture::want_copies() {
  if (!copies_.empty()) want_window_();
}

void AfterCapture::end_window() { write_copies(); }

// Every copy gathered within one window is one statement (kCopyAfterSql), prepared once per store
// connection as the write is: at churn rates a statement per absorbed after was the store's
// costliest (issue 21's breakdown).
// One copy statement at a time: two on two store connections could commit out of order, and a
// recreate's copy that lands before the previous cycle's would pair with the before two cycles back
// (tests/after/test_churn_pairs.py, under load). Those gathered meanwhile go in the next statement;
// past the after queue's bound, or at shutdown, they go at once rather than wait on a store that
// does not answer.
void AfterCapture::write_copies(bool now) {
  if (copies_.empty()) return;
  if (copy_in_flight_ && !now && copies_.size() < cfg_.after_queue_max) return;
  copy_in_flight_ = true;
  ledger_.exec([copies = std::move(copies_), this](const StoreSql& sql) {
    return BatchQuery{"predrop_copy_after_v3", sql.copy_after, copy_after_params(copies, cfg_), Plan::follows_growth};
  }, "afters copied from befores", [this] {
    copy_in_flight_ = false;
    write_copies();
  }, [this](const PgResult& r) {
    for (int i = 0; i < r.rows(); ++i)
      if (!r.is_null(i, 2)) announcer_.add(r.text(i, 2));
  });
  copies_.clear();
}

// Half the capture pool at most, so that holds always find a connection soon. An after starts
// cfg.after_delay after its commit at the earliest: a DROP or ALTER of the same table that follows
// within it (CREATE / INSERT / DROP churn) absorbs it, and then it costs no catalog read.
void AfterCapture::pump() {
  const int limit = cfg_.after_concurrency > 0 ? cfg_.after_concurrency : std::max(1, cfg_.pool_size / 2);
  const auto now = Clock::now();
  while (!stopped_ && static_cast<int>(running_.size()) < limit && !queue_.empty() && queue_.front().ready <= now) {
    SnapshotRequest req = std::move(queue_.front().request);
    queue_.pop_front();
    req.deadline = now + cfg_.default_deadline;
    req.befores_meanwhile = std::make_shared<std::vector<std::string>>(req.targets.size());
    auto run = running_.insert(running_.end(), req);
    pipeline_.submit(std::move(req), [this, run](SnapshotResult result) {
      // The pipeline calls back on this thread.
      SnapshotRequest finished = std::move(*run);
      running_.erase(run);
      done(finished, result);
      publish();
      pump();
    });
  }
  if (!stopped_ && static_cast<int>(running_.size()) < limit && !queue_.empty() && !delay_armed_) {
    delay_armed_ = true;
    delay_timer_.expires_at(queue_.front().ready);
    delay_timer_.async_wait([this](const boost::system::error_code& ec) {
      delay_armed_ = false;
      if (!ec) pump();
    });
  }
  publish();
}

void AfterCapture::done(const SnapshotRequest& req, const SnapshotResult& result) {
  if (stopped_) return;
  std::vector<TableResult> created;
  for (const auto& t : result.tables) {
    if (t.outcome == SnapshotOutcome::table_missing) {
      // Gone when read: a hold's before of it written meanwhile holds its shape.
      const auto& befores = *req.befores_meanwhile;
      for (size_t i = 0; i < req.targets.size(); ++i)
        if (!befores[i].empty() && req.targets[i].name == t.table && req.targets[i].schema == t.schema) {
          ++counters_.afters_absorbed;
          ++counters_.afters_written;
          copies_.push_back({befores[i], req.reason, req.targets[i].pair_hint, req.ctx});
          break;
        }
      continue;
    }
    if (t.outcome != SnapshotOutcome::written) continue;
    ++counters_.afters_written;
    if (req.reason == SnapshotReason::post_create) created.push_back(t);
    if (t.stats_available || req.reason == SnapshotReason::post_analyze || cfg_.stats_horizon.count() <= 0 || t.oid == 0) continue;
    auto key = std::make_pair(req.ctx.database, t.oid);
    waiting_[key] = Waiting{req.ctx, t.snapshot_id, t.oid, t.schema, t.table, Clock::now() + cfg_.stats_horizon};
    // At the bound the one waiting longest gives up: a scan, paid only there.
    if (waiting_.size() > cfg_.stats_waiting_max) {
      auto oldest = std::min_element(waiting_.begin(), waiting_.end(),
                                     [](const auto& a, const auto& b) { return a.second.expires < b.second.expires; });
      waiting_.erase(oldest);
      ++counters_.stats_gave_up;
    }
  }
  if (cfg_.analyze_after_create && !created.empty()) analyze(req.ctx.database, created);
  want_copies();
  arm_poll();
}

// capture.analyze_after_create: the operator chose to have new tables sampled at once. ANALYZE
// is allowed in the capture sessions' read-only transactions (it changes no table's contents).
void AfterCapture::analyze(const std::string& database, const std::vector<TableResult>& tables) {
  capture_pool_.acquire(database, [this, tables](ConnPool::Conn conn, std::string err) {
    if (!conn) return spdlog::warn("predrop ANALYZE after create: {}", err);
    std::string sql;
    for (const auto& t : tables) {
      if (!sql.empty()) sql += ", ";
      sql += conn->quote_ident(t.schema) + "." + conn->quote_ident(t.table);
    }
    ++counters_.analyzes;
    conn->exec("ANALYZE " + sql, {}, [this, conn](PgResult r) {
      capture_pool_.release(conn, r.ok());
      if (!r.ok()) spdlog::warn("predrop ANALYZE after create failed (the profile waits for autovacuum): {}", r.error);
      // The poll finds the statistics at once rather than a period later.
      else poll();
    });
  }, true);
}

void AfterCapture::arm_poll() {
  if (stopped_ || poll_armed_ || waiting_.empty()) return;
  poll_armed_ = true;
  poll_timer_.expires_after(cfg_.stats_poll);
  poll_timer_.async_wait([this](const boost::system::error_code& ec) {
    poll_armed_ = false;
    if (!ec) poll();
  });
}

void AfterCapture::poll() {
  if (stopped_) return;
  if (polls_running_ > 0) return arm_poll();
  auto now = Clock::now();
  std::map<std::string, std::vector<Waiting>> by_database;
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if (it->second.expires <= now) {
      ++counters_.stats_gave_up;
      spdlog::debug("predrop: no statistics for table OID {} in database '{}' within the horizon; its after keeps the shape alone",
                    it->second.oid, it->first.first);
      it = waiting_.erase(it);
      continue;
    }
    by_database[it->first.first].push_back(it->second);
    ++it;
  }
  publish();
  for (auto& [database, waiting] : by_database) poll_database(database, std::move(waiting));
  arm_poll();
}

// One statement for every table of a database that waits.
void AfterCapture::poll_database(const std::string& database, std::vector<Waiting> waiting) {
  ++polls_running_;
  capture_pool_.acquire(database, [this, database, waiting = std::move(waiting)](ConnPool::Conn conn, std::string err) {
    if (!conn) {
      --polls_running_;
      return spdlog::debug("predrop statistics check for database '{}': {}", database, err);
    }
    std::vector<std::optional<std::string>> oids;
    for (const auto& w : waiting) oids.push_back(std::to_string(w.oid));
    ++counters_.stats_queries;
    ++counters_.catalog;
    conn->exec(
        "SELECT o::bigint, EXISTS (SELECT 1 FROM pg_stat_user_tables s WHERE s.relid = o"
        " AND coalesce(s.last_analyze, s.last_autoanalyze) IS NOT NULL)"
        " FROM unnest($1::oid[]) AS o WHERE EXISTS (SELECT 1 FROM pg_class c WHERE c.oid = o)"
        // A table a quarantine moved is gone too, as for the catalog read (capture/catalog_queries.cpp).
        "   AND NOT EXISTS (SELECT 1 FROM pg_description d WHERE d.objoid = o AND d.classoid = 'pg_class'::regclass"
        "                    AND d.objsubid = 0 AND " + std::string(quarantine::kQuarantineMarkSql) + ")",
        {pg_array_literal(oids)}, [this, conn, database, waiting](PgResult r) {
          --polls_running_;
          capture_pool_.release(conn, r.ok());
          if (stopped_) return;
          if (!r.ok()) return spdlog::debug("predrop statistics check failed: {}", r.error);
          std::map<uint32_t, bool> present;
          for (int i = 0; i < r.rows(); ++i)
            present[static_cast<uint32_t>(std::stoul(r.text(i, 0)))] = r.text(i, 1) == "t";
          for (const auto& w : waiting) {
            auto key = std::make_pair(database, w.oid);
            auto it = waiting_.find(key);
            if (it == waiting_.end() || it->second.after_id != w.after_id) continue;   // replaced meanwhile
            auto p = present.find(w.oid);
            if (p == present.end()) {   // the table is gone: its after was its last shape
              waiting_.erase(it);
              continue;
            }
            if (!p->second) continue;
            waiting_.erase(it);
            SnapshotRequest req;
            req.ctx = w.ctx;
            req.reason = SnapshotReason::post_analyze;
            req.profile_of = w.after_id;
            req.targets.push_back({TargetKind::after_by_oid, w.schema, w.table, {}, {}, w.oid});
            submit(std::move(req));
          }
          publish();
        });
  }, true);
}

void AfterCapture::publish() {
  counters_.afters_queued = queue_.size() + running_.size();
  counters_.stats_waiting = waiting_.size();
}

void AfterCapture::flush_copies() { write_copies(true); }

void AfterCapture::shutdown() {
  flush_copies();
  stopped_ = true;
  poll_timer_.cancel();
  delay_timer_.cancel();
  queue_.clear();
  waiting_.clear();
  publish();
}

}  // namespace predrop::capture
