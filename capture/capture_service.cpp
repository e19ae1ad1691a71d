// CaptureService: one event-loop thread drives every capture and store connection through
// libpq's non-blocking API. A request goes: capture connection (bounded pool, per database) ->
// one batched catalog query -> one bounded pg_stats query -> optional enrichment -> store
// connection (its own bounded pool) -> one statement writing snapshots, dedup and ledger rows.
// A timer per request enforces its deadline: done() runs once, with "timeout", and whatever
// connection was busy for it is cancelled and closed.
#include <spdlog/spdlog.h>

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <set>
#include <unordered_map>
#include <thread>

#include "capture/capture.hpp"
#include "capture/catalog_queries.hpp"
#include "capture/conn_pool.hpp"
#include "capture/pg_async.hpp"
#include "capture/store_admin.hpp"
#include "capture/store_writer.hpp"

namespace predrop::capture {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

namespace {

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

// One snapshot request in flight. Lives on the event-loop thread only.
struct Job {
  Job(asio::io_context& io, SnapshotRequest r, std::function<void(SnapshotResult)> d)
      : req(std::move(r)), done(std::move(d)), timer(io) {}
  SnapshotRequest req;
  std::function<void(SnapshotResult)> done;
  asio::steady_timer timer;
  Clock::time_point started = Clock::now();
  bool finished = false;
  bool retried = false;  // already moved once to a fresh connection after the server closed one
  // What it waits for or holds right now (at most one of each).
  ConnPool* waiting_pool = nullptr;
  uint64_t ticket = 0;
  std::shared_ptr<PgConn> conn;
  ConnPool* conn_pool = nullptr;
  // What it has learnt so far.
  bool resolved = false;
  CatalogResult catalog;
  std::vector<WriteRow> rows;
  double capture_ms = 0;
};
using JobPtr = std::shared_ptr<Job>;

}  // namespace

struct CaptureService::Impl {
  explicit Impl(CaptureConfig c)
      : cfg(std::move(c)),
        work(asio::make_work_guard(io)),
        capture_pool(io, cfg.pool_size, [this](const std::string& db) { return capture_params(db); }, "capture"),
        store_pool(io, cfg.store_pool_size, [this](const std::string&) { return store_params(); }, "store") {
    thread = std::thread([this] { io.run(); });
    health_thread = std::thread([this] { watch_store(); });
  }

  CaptureConfig cfg;
  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> work;
  ConnPool capture_pool, store_pool;
  std::thread thread;
  std::optional<StoreSql> sql;
  std::set<JobPtr> jobs;
  // Ledger rows whose INSERT is still on its way, by event id, with the updates that must follow
  // it (a hold_ms update run on another store connection could otherwise overtake the INSERT).
  std::unordered_map<std::string, std::vector<std::function<void()>>> ledger_in_flight;
  // A ledger statement for the store (row inserts, hold and outcome updates); `after` runs once it
  // was sent and answered, or given up.
  struct StoreStatement {
    std::function<BatchQuery()> make;
    std::string what;
    std::function<void()> after;
  };
  // Statements the store could not take because it was unreachable: kept in order and retried one
  // at a time with backoff, so a brief outage loses no ledger row. Bounded by cfg.store_retry_max.
  std::deque<StoreStatement> store_retry;
  asio::steady_timer retry_timer{io};
  bool retry_armed = false;
  bool retry_in_flight = false;  // the queue's front is out being retried (it still counts)
  std::chrono::milliseconds retry_delay{kRetryFirst};
  static constexpr std::chrono::milliseconds kRetryFirst{250}, kRetryMax{5000};
  std::atomic<uint64_t> n_retry_queued{0}, n_retry_lost{0};
  std::atomic<bool> stopped{false};
  std::atomic<uint64_t> n_dropped{0}, n_not_dropped{0};
  std::atomic<uint64_t> n_catalog{0}, n_enrich{0}, n_store{0}, n_written{0}, n_timeouts{0}, n_in_flight{0};
  std::atomic<uint64_t> pool_idle{0}, pool_busy{0}, pool_queued{0}, pool_opened{0};
  // Store health: the last snapshot write, failed store write or store check decides it.
  std::atomic<int> store_up{-1};                // -1: not known yet
  std::atomic<int64_t> store_verdict_at{0};     // steady clock ticks
  std::atomic<int64_t> store_success_unix_ms{0};
  std::mutex health_mu;
  std::condition_variable health_cv;
  bool health_stop = false;
  std::thread health_thread;

  ConnectParams capture_params(const std::string& db) const {
    return connect_params(cfg.capture_conninfo, db, "predrop-capture",
                          "-c statement_timeout=" + std::to_string(cfg.capture_statement_timeout_ms) +
                              " -c lock_timeout=" + std::to_string(cfg.capture_lock_timeout_ms) +
                              " -c default_transaction_read_only=on" +
                              // The catalog queries probe by name/OID, so a generic plan is as good as
                              // a custom one, and re-planning the batched CTE costs milliseconds a hold.
                              " -c plan_cache_mode=force_generic_plan");
  }
  ConnectParams store_params() const {
    return connect_params(cfg.store_conninfo, "", "predrop-store",
                          "-c statement_timeout=" + std::to_string(cfg.store_statement_timeout_ms) +
                              " -c lock_timeout=2000 -c plan_cache_mode=force_generic_plan");
  }

  void note_store(bool ok, const std::string& why) {
    int was = store_up.exchange(ok ? 1 : 0);
    store_verdict_at = Clock::now().time_since_epoch().count();
    if (ok)
      store_success_unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                  std::chrono::system_clock::now().time_since_epoch()).count();
    if (was != 0 && !ok) spdlog::warn("predrop store not writable: {}", why);
    if (was == 0 && ok) spdlog::info("predrop store writable again");
  }

  // A quiet store is checked on this thread, never on the event loop: the check blocks (up to
  // connect_timeout + statement_timeout of store_writable) and a hung store must not stall captures.
  void watch_store() {
    std::unique_lock lock(health_mu);
    while (!health_stop) {
      auto since = Clock::now() - Clock::time_point(Clock::duration(store_verdict_at.load()));
      if (store_up.load() >= 0 && since < cfg.store_check_interval) {
        health_cv.wait_for(lock, cfg.store_check_interval - since, [this] { return health_stop; });
        continue;
      }
      lock.unlock();
      std::string err = store_writable(cfg.store_conninfo, cfg.store_table, cfg.events_table);
      note_store(err.empty(), err);
      lock.lock();
    }
  }

  void stop_watching_store() {
    {
      std::lock_guard lock(health_mu);
      health_stop = true;
    }
    health_cv.notify_all();
    if (health_thread.joinable()) health_thread.join();
  }

  void publish() {
    pool_idle = capture_pool.idle();
    pool_busy = capture_pool.busy();
    pool_queued = capture_pool.queued();
    pool_opened = capture_pool.opened();
  }

  // ---- connection handling for a job ----

  void acquire(const JobPtr& job, ConnPool& pool, const std::string& key, std::function<void()> next) {
    job->waiting_pool = &pool;
    job->ticket = pool.acquire(key, [this, job, &pool, next = std::move(next)](ConnPool::Conn conn, std::string err) {
      job->waiting_pool = nullptr;
      if (job->finished) {  // its deadline passed while the connection was being opened
        if (conn) pool.release(conn, true);
        return;
      }
      if (!conn) {
        fail(job, &pool == &store_pool ? SnapshotOutcome::store_error : SnapshotOutcome::capture_error, err);
        return;
      }
      job->conn = std::move(conn);
      job->conn_pool = &pool;
      publish();
      next();
    });
    publish();
  }

  void release(const JobPtr& job, bool reusable = true) {
    if (!job->conn) return;
    auto conn = std::move(job->conn);
    job->conn = nullptr;
    job->conn_pool->release(conn, reusable);
    publish();
  }

  // A pooled connection the server closed while it sat idle (a restart) fails its next statement:
  // that is no fault of the database, so the request moves once to a fresh connection.
  bool retry_if_closed(const JobPtr& job, ConnPool& pool, const std::string& key, std::function<void()> next) {
    if (!job->conn || job->conn->healthy() || job->retried) return false;
    job->retried = true;
    release(job, false);
    spdlog::info("predrop {} connection was closed by the server; retrying on a new one", &pool == &store_pool ? "store" : "capture");
    acquire(job, pool, key, std::move(next));
    return true;
  }

  void run(const JobPtr& job, const BatchQuery& q, std::function<void(PgResult)> next) {
    auto cb = [job, next = std::move(next)](PgResult r) {
      if (job->finished) return;
      next(std::move(r));
    };
    if (q.name) job->conn->exec_prepared(q.name, q.sql, q.params, std::move(cb));
    else job->conn->exec(q.sql, q.params, std::move(cb));
  }

  // ---- the request ----

  void start(JobPtr job) {
    jobs.insert(job);
    auto deadline = job->req.deadline == Clock::time_point{} ? job->started + cfg.default_deadline : job->req.deadline;
    job->timer.expires_at(deadline);
    job->timer.async_wait([this, job](const boost::system::error_code& ec) {
      if (!ec) on_timeout(job);
    });
    if (job->req.targets.empty()) return write(job);
    acquire(job, capture_pool, job->req.ctx.database, [this, job] { read_catalog(job); });
  }

  void read_catalog(const JobPtr& job) {
    ++n_catalog;
    run(job, catalog_query(job->req), [this, job](PgResult r) {
      if (!r.ok()) {
        if (retry_if_closed(job, capture_pool, job->req.ctx.database, [this, job] { read_catalog(job); })) return;
        return fail(job, SnapshotOutcome::capture_error, "catalog: " + r.error);
      }
      job->catalog = parse_catalog(r, job->req.targets.size());
      job->resolved = true;
      auto& tables = job->catalog.tables;
      for (auto& t : tables) {
        std::vector<std::string> names;
        for (const auto& c : t.snap.columns) names.push_back(c.name);
        t.snap.schema_hash = schema_hash(std::move(names), cfg.hash_excluded);
      }
      mark_profile_skipped(tables, cfg.bounds);
      read_stats(job);
    });
  }

  void read_stats(const JobPtr& job) {
    auto q = stats_query(job->catalog.tables, cfg.bounds, cfg.naive_array_split);
    if (!q) return enrich(job, 0);
    ++n_catalog;
    run(job, *q, [this, job](PgResult r) {
      if (!r.ok()) return fail(job, SnapshotOutcome::capture_error, "pg_stats: " + r.error);
      apply_stats(r, job->catalog.tables, cfg.bounds, cfg.naive_array_split);
      enrich(job, 0);
    });
  }

  // Enrichment is best effort: a failing or missing query never stops the snapshot.
  void enrich(const JobPtr& job, int which) {
    const std::string* user_sql = which == 0 ? &cfg.enrich_identity_sql : which == 1 ? &cfg.enrich_provenance_sql : nullptr;
    if (!user_sql) {
      release(job);
      job->capture_ms = ms_since(job->started);
      return write(job);
    }
    auto q = enrich_query(*user_sql, job->catalog.tables);
    if (!q) return enrich(job, which + 1);
    ++n_enrich;
    run(job, *q, [this, job, which](PgResult r) {
      if (r.ok()) apply_enrichment(r, job->catalog.tables);
      else spdlog::debug("predrop enrichment query failed (snapshot goes on without it): {}", r.error);
      enrich(job, which + 1);
    });
  }

  // The rows this request writes: one per captured table, one per target that found nothing.
  // With a failure, every row carries it; without, captured tables are left to the write to decide.
  void build_rows(const JobPtr& job, std::optional<SnapshotOutcome> failure, const std::string& error) {
    job->rows.clear();
    const auto& req = job->req;
    if (job->resolved) {
      for (const auto& t : job->catalog.tables) {
        WriteRow row{new_uuid(), new_uuid(), t.snap.schema_name, t.snap.table_name, t.snap.table_oid, failure, error, &t};
        job->rows.push_back(std::move(row));
      }
    }
    for (size_t i = 0; i < req.targets.size(); ++i) {
      if (job->resolved && job->catalog.target_found[i]) continue;
      const auto& t = req.targets[i];
      WriteRow row{"", new_uuid(), "", "", std::nullopt, failure.value_or(SnapshotOutcome::table_missing), error, nullptr};
      if (t.kind == "drop_schema") row.schema = t.name;
      else if (t.kind != "drop_owned") row.schema = t.schema, row.table = t.name;
      job->rows.push_back(std::move(row));
    }
  }

  void write(const JobPtr& job) {
    build_rows(job, std::nullopt, "");
    acquire(job, store_pool, "", [this, job] {
      ensure_sql(*job->conn);
      ++n_store;
      // Prepared once per store connection: planning the write costs more than running it.
      BatchQuery q{"predrop_store_write_v1", sql->write, write_params(job->rows, job->req.ctx, cfg, job->req.reason, job->capture_ms)};
      run(job, q, [this, job](PgResult r) {
        if (!r.ok() && retry_if_closed(job, store_pool, "", [this, job] { write(job); })) return;
        release(job);
        if (!r.ok()) return fail(job, SnapshotOutcome::store_error, r.error);
        note_store(true, {});
        SnapshotResult res;
        for (int i = 0; i < r.rows() && i < static_cast<int>(job->rows.size()); ++i) {
          const WriteRow& row = job->rows[i];
          TableResult t{row.schema, row.table, row.oid.value_or(0), row.outcome.value_or(SnapshotOutcome::written), "",
                        row.event_id, row.error};
          if (!row.outcome) {
            if (r.text(i, 1) == "t") {
              t.outcome = SnapshotOutcome::written;
              t.snapshot_id = row.snapshot_id;
              ++n_written;
            } else {
              t.outcome = SnapshotOutcome::deduplicated;
              t.snapshot_id = r.is_null(i, 2) ? "" : r.text(i, 2);
            }
          }
          res.tables.push_back(std::move(t));
        }
        finish(job, std::move(res));
      });
    });
  }

  void ensure_sql(PgConn& conn) {
    if (sql) return;
    auto quoted = [&](const std::string& name) {
      auto [schema, table] = split_qualified(name);
      return conn.quote_ident(schema) + "." + conn.quote_ident(table);
    };
    sql = build_store_sql(quoted(cfg.store_table), quoted(cfg.events_table));
  }

  // ---- ends of a request ----

  static void summarise(SnapshotResult& res) {
    std::optional<SnapshotOutcome> failure, any_ok;
    for (const auto& t : res.tables) {
      if (t.outcome == SnapshotOutcome::written) any_ok = SnapshotOutcome::written;
      else if (t.outcome == SnapshotOutcome::deduplicated && !any_ok) any_ok = SnapshotOutcome::deduplicated;
      else if (t.outcome != SnapshotOutcome::table_missing && t.outcome != SnapshotOutcome::deduplicated && !failure) {
        failure = t.outcome;
        res.error = t.error;
      }
    }
    res.outcome = failure ? *failure : any_ok ? *any_ok : SnapshotOutcome::table_missing;
  }

  void finish(const JobPtr& job, SnapshotResult res) {
    if (job->finished) return;
    job->finished = true;
    job->timer.cancel();
    jobs.erase(job);
    --n_in_flight;
    res.capture_ms = ms_since(job->started);
    summarise(res);
    try {
      job->done(std::move(res));
    } catch (const std::exception& e) {
      spdlog::error("predrop capture callback threw: {}", e.what());
    }
  }

  // A failure ends the request at once, then its ledger rows are written (best effort).
  void fail(const JobPtr& job, SnapshotOutcome outcome, const std::string& error) {
    if (job->finished) return;
    if (outcome == SnapshotOutcome::timeout) ++n_timeouts;
    if (outcome == SnapshotOutcome::store_error) note_store(false, error);
    if (job->waiting_pool) {
      job->waiting_pool->cancel(job->ticket);
      job->waiting_pool = nullptr;
    }
    // A connection busy for this request may be stuck (a slow store, a lock): cancel and close it.
    if (job->conn) release(job, !job->conn->busy());
    spdlog::warn("predrop snapshot {} for {} target(s) in database '{}': {}", to_string(outcome), job->req.targets.size(),
                 job->req.ctx.database, error);
    build_rows(job, outcome, error);
    SnapshotResult res;
    for (const auto& row : job->rows)
      res.tables.push_back({row.schema, row.table, row.oid.value_or(0), *row.outcome, "", row.event_id, row.error});
    auto rows = job->rows;
    finish(job, std::move(res));
    write_events(std::move(rows), job->req.ctx, job->req.reason, std::nullopt, job->capture_ms);
  }

  void on_timeout(const JobPtr& job) { fail(job, SnapshotOutcome::timeout, "deadline passed"); }

  // ---- ledger-only and follow-up statements (no deadline of their own but statement_timeout) ----

  void store_exec(std::function<BatchQuery()> make, std::string what, std::function<void()> after = nullptr) {
    store_send(StoreStatement{std::move(make), std::move(what), std::move(after)}, false);
  }

  void store_send(StoreStatement st, bool retrying) {
    store_pool.acquire("", [this, st = std::move(st), retrying](ConnPool::Conn conn, std::string err) mutable {
      if (!conn) {
        note_store(false, err);
        return keep_for_retry(std::move(st), retrying, err);
      }
      ensure_sql(*conn);
      ++n_store;
      BatchQuery q = st.make();
      conn->exec(q.sql, q.params, [this, conn, st, retrying](PgResult r) {
        // A statement error is the store's answer; a connection that died under it is an outage.
        bool lost = !r.ok() && !conn->healthy();
        store_pool.release(conn, !lost);
        if (!r.ok()) note_store(false, r.error);
        if (lost) return keep_for_retry(st, retrying, r.error);
        if (!r.ok()) spdlog::warn("predrop {} failed: {}", st.what, r.error);
        if (st.after) st.after();
        if (retrying) {
          retry_in_flight = false;
          retry_delay = kRetryFirst;
          retry_next();
        }
      });
    });
  }

  void keep_for_retry(StoreStatement st, bool retrying, const std::string& err) {
    if (stopped) {
      spdlog::warn("predrop {}: store unavailable while stopping, not written: {}", st.what, err);
      if (st.after) st.after();
      return;
    }
    if (retrying) {
      retry_in_flight = false;
      store_retry.push_front(std::move(st));
      retry_delay = std::min(retry_delay * 2, kRetryMax);
    } else {
      if (retry_waiting() >= static_cast<size_t>(std::max(cfg.store_retry_max, 0))) {
        ++n_retry_lost;
        if (store_retry.empty()) {
          spdlog::error("predrop {} lost: store unavailable and no retry queue: {}", st.what, err);
          if (st.after) st.after();
          return;
        }
        spdlog::error("predrop store retry queue full ({}): oldest {} lost", store_retry.size(), store_retry.front().what);
        if (auto after = std::move(store_retry.front().after)) after();
        store_retry.pop_front();
      }
      spdlog::warn("predrop {}: store unavailable, kept for retry ({} waiting): {}", st.what, retry_waiting() + 1, err);
      store_retry.push_back(std::move(st));
    }
    n_retry_queued = retry_waiting();
    arm_retry();
  }

  size_t retry_waiting() const { return store_retry.size() + (retry_in_flight ? 1 : 0); }

  void arm_retry() {
    if (retry_armed || retry_in_flight || store_retry.empty() || stopped) return;
    retry_armed = true;
    retry_timer.expires_after(retry_delay);
    retry_timer.async_wait([this](const boost::system::error_code& ec) {
      retry_armed = false;
      if (!ec) retry_next();
    });
  }

  void retry_next() {
    n_retry_queued = retry_waiting();
    if (retry_in_flight || store_retry.empty() || stopped) return;
    auto st = std::move(store_retry.front());
    store_retry.pop_front();
    retry_in_flight = true;
    store_send(std::move(st), true);
  }

  // Runs fn now, or once the INSERT of any of these ledger rows has finished.
  void after_ledger_insert(const std::vector<std::string>& event_ids, std::function<void()> fn) {
    for (const auto& id : event_ids)
      if (auto it = ledger_in_flight.find(id); it != ledger_in_flight.end()) {
        it->second.push_back(std::move(fn));
        return;
      }
    fn();
  }

  void write_events(std::vector<WriteRow> rows, StatementContext ctx, std::string reason, std::optional<double> hold_ms,
                    double capture_ms) {
    if (rows.empty()) return;
    std::vector<std::string> ids;
    for (const auto& r : rows) {
      ids.push_back(r.event_id);
      ledger_in_flight[r.event_id];
    }
    store_exec(
        [this, rows = std::move(rows), ctx = std::move(ctx), reason = std::move(reason), hold_ms, capture_ms] {
          return BatchQuery{nullptr, sql->events, events_params(rows, ctx, cfg, reason, hold_ms, capture_ms)};
        },
        "ledger write",
        [this, ids = std::move(ids)] {
          std::vector<std::function<void()>> waiting;
          for (const auto& id : ids) {
            auto it = ledger_in_flight.find(id);
            if (it == ledger_in_flight.end()) continue;
            for (auto& fn : it->second) waiting.push_back(std::move(fn));
            ledger_in_flight.erase(it);
          }
          for (auto& fn : waiting) fn();
        });
  }

  void confirm(std::string database, std::vector<PendingOutcome> pending) {
    if (pending.empty()) return;
    capture_pool.acquire(database, [this, pending = std::move(pending)](ConnPool::Conn conn, std::string err) {
      if (!conn) return spdlog::warn("predrop outcome check: {}", err);
      std::vector<std::optional<std::string>> oids;
      for (const auto& p : pending) oids.push_back(std::to_string(p.oid));
      ++n_catalog;
      conn->exec("SELECT o::bigint FROM unnest($1::oid[]) AS o WHERE EXISTS (SELECT 1 FROM pg_class c WHERE c.oid = o)",
                 {pg_array_literal(oids)}, [this, conn, pending](PgResult r) {
                   capture_pool.release(conn, true);
                   publish();
                   if (!r.ok()) return spdlog::warn("predrop outcome check failed: {}", r.error);
                   std::set<uint32_t> alive;
                   for (int i = 0; i < r.rows(); ++i) alive.insert(static_cast<uint32_t>(std::stoul(r.text(i, 0))));
                   std::vector<std::string> outcomes;
                   for (const auto& p : pending) {
                     bool survived = alive.count(p.oid) > 0;
                     ++(survived ? n_not_dropped : n_dropped);
                     outcomes.push_back(survived ? "not_dropped" : "dropped");
                   }
                   store_exec([this, pending, outcomes] { return BatchQuery{nullptr, sql->outcome, outcome_params(pending, outcomes)}; },
                              "outcome update");
                 });
    });
  }

  void shutdown() {
    for (auto job : std::set<JobPtr>(jobs)) fail(job, SnapshotOutcome::capture_error, "capture service stopped");
    retry_timer.cancel();
    if (!store_retry.empty())
      spdlog::error("predrop stopping with {} ledger statement(s) the store never took", store_retry.size());
    capture_pool.close_all();
    store_pool.close_all();
    publish();
  }
};

CaptureService::CaptureService(CaptureConfig cfg) : impl_(std::make_unique<Impl>(std::move(cfg))) {}

CaptureService::~CaptureService() { stop(); }

void CaptureService::snapshot(SnapshotRequest request, std::function<void(SnapshotResult)> done) {
  if (impl_->stopped) {
    SnapshotResult r;
    r.outcome = SnapshotOutcome::capture_error;
    r.error = "capture service stopped";
    done(std::move(r));
    return;
  }
  ++impl_->n_in_flight;
  auto job = std::make_shared<Job>(impl_->io, std::move(request), std::move(done));
  asio::post(impl_->io, [impl = impl_.get(), job] { impl->start(job); });
}

void CaptureService::record_event(EventRecord event) {
  if (impl_->stopped) return;
  asio::post(impl_->io, [impl = impl_.get(), event = std::move(event)] {
    WriteRow row{"", new_uuid(), event.schema, event.table, std::nullopt, event.outcome, event.error, nullptr};
    impl->write_events({row}, event.ctx, "pre_drop", event.hold_ms, 0);
  });
}

void CaptureService::reconfigure(const CaptureConfig& next) {
  if (impl_->stopped) return;
  // cfg's per-request fields are read on the event-loop thread only, so they change there.
  asio::post(impl_->io, [impl = impl_.get(), next] {
    auto& cfg = impl->cfg;
    cfg.bounds = next.bounds;
    cfg.hash_excluded = next.hash_excluded;
    cfg.naive_array_split = next.naive_array_split;
    cfg.dedup_window_s = next.dedup_window_s;
    cfg.enrich_identity_sql = next.enrich_identity_sql;
    cfg.enrich_provenance_sql = next.enrich_provenance_sql;
  });
}

void CaptureService::confirm_outcomes(std::string database, std::vector<PendingOutcome> pending) {
  if (impl_->stopped) return;
  asio::post(impl_->io, [impl = impl_.get(), database = std::move(database), pending = std::move(pending)]() mutable {
    impl->confirm(std::move(database), std::move(pending));
  });
}

void CaptureService::mark_hold(const std::vector<TableResult>& tables, double hold_ms) {
  if (impl_->stopped) return;
  std::vector<std::string> snapshot_ids, event_ids;
  for (const auto& t : tables) {
    if (!t.snapshot_id.empty() && t.outcome == SnapshotOutcome::written) snapshot_ids.push_back(t.snapshot_id);
    if (!t.event_id.empty()) event_ids.push_back(t.event_id);
  }
  if (snapshot_ids.empty() && event_ids.empty()) return;
  asio::post(impl_->io, [impl = impl_.get(), snapshot_ids, event_ids, hold_ms] {
    impl->after_ledger_insert(event_ids, [impl, snapshot_ids, event_ids, hold_ms] {
      impl->store_exec([impl, snapshot_ids, event_ids, hold_ms] {
        // A miss has no snapshot row: leave the snapshot table (perhaps the locked thing) alone.
        const std::string& q = snapshot_ids.empty() ? impl->sql->hold_events : impl->sql->hold;
        return BatchQuery{nullptr, q, hold_params(snapshot_ids, event_ids, hold_ms)};
      }, "hold update");
    });
  });
}

CaptureStats CaptureService::stats() const {
  CaptureStats s;
  s.pool_idle = impl_->pool_idle;
  s.pool_busy = impl_->pool_busy;
  s.queued = impl_->pool_queued;
  s.capture_connections_opened = impl_->pool_opened;
  s.catalog_queries = impl_->n_catalog;
  s.enrich_queries = impl_->n_enrich;
  s.store_statements = impl_->n_store;
  s.snapshots_written = impl_->n_written;
  s.timeouts = impl_->n_timeouts;
  s.in_flight = impl_->n_in_flight;
  s.dropped = impl_->n_dropped;
  s.not_dropped = impl_->n_not_dropped;
  s.store_up = impl_->store_up == 1;
  s.store_last_success_unix_s = impl_->store_success_unix_ms / 1000.0;
  s.store_retry_queued = impl_->n_retry_queued;
  s.store_retry_lost = impl_->n_retry_lost;
  return s;
}

std::string CaptureService::check_store() const {
  std::string err = store_writable(impl_->cfg.store_conninfo, impl_->cfg.store_table, impl_->cfg.events_table);
  impl_->note_store(err.empty(), err);
  return err;
}

bool CaptureService::recent_events(int limit, std::string& json, std::string& error) const {
  return read_recent_events(impl_->cfg.store_conninfo, impl_->cfg.events_table, limit, json, error);
}

void CaptureService::stop() {
  if (!impl_ || impl_->stopped.exchange(true)) return;
  asio::post(impl_->io, [impl = impl_.get()] {
    impl->shutdown();
    impl->work.reset();
    impl->io.stop();
  });
  if (impl_->thread.joinable()) {
    if (impl_->thread.get_id() == std::this_thread::get_id()) impl_->thread.detach();
    else impl_->thread.join();
  }
  impl_->stop_watching_store();
}

}  // namespace predrop::capture
