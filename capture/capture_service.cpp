// CaptureService: one event-loop thread drives every capture and store connection through
// libpq's non-blocking API. Its parts: the job pipeline of snapshot requests
// (capture/snapshot_pipeline), the bounded ledger writer (capture/ledger_writer) and the store's
// health (capture/store_health). Here: the pools, the thread, and the calls the proxy makes.
#include <spdlog/spdlog.h>

#include <array>
#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <algorithm>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "capture/after_capture.hpp"
#include "capture/announcer.hpp"
#include "capture/capture.hpp"
#include "capture/capture_counters.hpp"
#include "capture/conn_pool.hpp"
#include "capture/ledger_writer.hpp"
#include "capture/pg_async.hpp"
#include "quarantine/move_sql.hpp"
#include "capture/snapshot_pipeline.hpp"
#include "capture/store_admin.hpp"
#include "capture/store_health.hpp"
#include "capture/store_writer.hpp"

namespace predrop::capture {

namespace asio = boost::asio;

namespace {

// Each pending OID with the quarantine schema of its statement ('' when none): where it is now.
// Columns: oid, name, comment, bytes (with partitions, indexes and TOAST; only in that schema),
// schema, whether it is in that schema. The comment's quarantine id and hold
// (quarantine/move_sql.hpp) are read from its text by the check (quarantine_mark), not cast to
// jsonb here: one comment that is not JSON, written by hand on a table in the quarantine schema,
// would fail the cast and with it every check of the batch. pg_class is probed by OID, one index
// lookup a pending OID (the lateral's OFFSET 0 keeps it so). Joined, the generic plan the server
// makes while pg_class is a few dozen pages hashes the OIDs and reads all of pg_class at every
// check, with every dead row a recreate churn leaves there until vacuum (issue 21: 2.2 of the
// check's 5 ms in the churn bench's database of 600 relations).
constexpr const char* kOutcomeCheckSql = R"SQL(
SELECT u.o::bigint, c.relname::text, d.description,
       CASE WHEN n.nspname = u.q THEN coalesce((SELECT sum(pg_total_relation_size(p.relid))::bigint
                                                   FROM pg_partition_tree(c.oid) p), pg_total_relation_size(c.oid)) END,
       n.nspname::text, n.nspname = u.q
  FROM unnest($1::oid[], $2::text[]) AS u(o, q)
  CROSS JOIN LATERAL (SELECT * FROM pg_class c WHERE c.oid = u.o OFFSET 0) c
  JOIN pg_namespace n ON n.oid = c.relnamespace
  LEFT JOIN pg_description d ON d.objoid = c.oid AND d.classoid = 'pg_class'::regclass AND d.objsubid = 0
)SQL";

// What a quarantined table's comment says of its move (quarantine/move_sql.hpp): the quarantine's
// id and the hold that made it ("hold", absent where an older predrop moved it). A comment that is
// not a JSON object, or has no string id, marks no quarantine.
struct QuarantineMark {
  std::string id, hold;
};

QuarantineMark quarantine_mark(const std::string& comment) {
  QuarantineMark mark;
  if (comment.empty() || comment.front() != '{') return mark;
  const auto j = nlohmann::json::parse(comment, nullptr, false);
  if (!j.is_object()) return mark;
  auto text = [&j](const char* key) {
    auto it = j.find(key);
    return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  mark.id = text("id");
  mark.hold = text("hold");
  return mark;
}

}  // namespace

struct CaptureService::Impl {
  explicit Impl(CaptureConfig c)
      : cfg(std::move(c)),
        work(asio::make_work_guard(io)),
        capture_pool(io, cfg.pool_size, [this](const std::string& db) { return capture_params(db); }, "capture",
                     cfg.idle_close),
        store_pool(io, cfg.store_pool_size, [this](const std::string&) { return store_params(); }, "store",
                   cfg.idle_close),
        health(cfg.store_conninfo, cfg.store_table, cfg.events_table, cfg.store_check_interval),
        ledger(io, store_pool, cfg, health, counters, stopped, [this](PgConn& conn) -> const StoreSql& { return sql_for(conn); }),
        announcer(ledger, counters, [this] { want_window(); }),
        pipeline(io, cfg, capture_pool, store_pool, ledger, announcer, health, counters,
                 [this](PgConn& conn) -> const StoreSql& { return sql_for(conn); }),
        afters(io, cfg, pipeline, capture_pool, ledger, announcer, counters, [this] { want_window(); }) {
    thread = std::thread([this] { io.run(); });
  }

  CaptureConfig cfg;
  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> work;
  std::atomic<bool> stopped{false};
  CaptureCounters counters;
  ConnPool capture_pool, store_pool;
  std::optional<StoreSql> sql;
  StoreHealth health;
  LedgerWriter ledger;
  Announcer announcer;
  SnapshotPipeline pipeline;
  AfterCapture afters;
  std::thread thread;

  ConnectParams capture_params(const std::string& db) const {
    return connect_params(cfg.capture_conninfo, db, "predrop-capture",
                          "-c statement_timeout=" + std::to_string(cfg.capture_statement_timeout_ms) +
                              " -c lock_timeout=" + std::to_string(cfg.capture_lock_timeout_ms) +
                              " -c default_transaction_read_only=on" +
                              // The catalog queries probe by name/OID, so a generic plan is as good as
                              // a custom one, and re-planning the batched CTE costs milliseconds a hold.
                              " -c plan_cache_mode=force_generic_plan"
                              // A generic plan's estimates can pass jit_above_cost, and JIT compiling
                              // a millisecond query costs ~70 ms, every execution (issue 21).
                              " -c jit=off");
  }
  ConnectParams store_params() const {
    return connect_params(cfg.store_conninfo, "", "predrop-store",
                          "-c statement_timeout=" + std::to_string(cfg.store_statement_timeout_ms) +
                              " -c lock_timeout=2000 -c plan_cache_mode=force_generic_plan -c jit=off");
  }

  const StoreSql& sql_for(PgConn& conn) {
    if (!sql) {
      auto quoted = [&](const std::string& name) {
        auto [schema, table] = split_qualified(name);
        return conn.quote_ident(schema) + "." + conn.quote_ident(table);
      };
      sql = build_store_sql(quoted(cfg.store_table), quoted(cfg.events_table));
    }
    return *sql;
  }

  // After the client's transaction ended: which captured OIDs still exist, and where, onto their
  // rows. The checks gathered in one window (the sweep's, below) go as one catalog read and one
  // store update per database, one check in flight per database: a churn's outcomes cost a
  // statement per window, not per DROP.
  struct OutcomeBatch {
    std::vector<PendingOutcome> waiting;
    bool checking = false;
  };
  std::map<std::string, OutcomeBatch> outcome_batches;

  void confirm(std::string database, std::vector<PendingOutcome> pending) {
    if (pending.empty()) return;
    auto& batch = outcome_batches[database];
    for (auto& p : pending) batch.waiting.push_back(std::move(p));
    want_window();
  }

  void start_outcome_checks() {
    for (auto it = outcome_batches.begin(); it != outcome_batches.end();) {
      OutcomeBatch& b = it->second;
      if (!b.checking && !b.waiting.empty()) {
        b.checking = true;
        ++checks_in_flight;
        check_outcomes(it->first, std::move(b.waiting));
        b.waiting.clear();
      }
      // A database with nothing waiting or running is forgotten.
      it = !b.checking && b.waiting.empty() ? outcome_batches.erase(it) : std::next(it);
    }
  }

  void outcomes_checked(const std::string& database) {
    --checks_in_flight;
    auto it = outcome_batches.find(database);
    if (it == outcome_batches.end()) return;
    it->second.checking = false;
    if (!it->second.waiting.empty()) want_window();
  }

  // Stopping: what waits for its window goes now, and the service shuts down once the outcome
  // checks and the store statements they lead to are answered (or after a bound, the store being
  // down: the retry queue is not waited for).
  bool draining = false;
  int checks_in_flight = 0;
  asio::steady_timer drain_timer{io};
  std::chrono::steady_clock::time_point drain_deadline;

  void drain_then(std::function<void()> then) {
    draining = true;
    drain_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    start_outcome_checks();
    afters.flush_copies();
    announcer.flush();
    wait_drained(std::move(then));
  }

  void wait_drained(std::function<void()> then) {
    if ((checks_in_flight == 0 && ledger.in_flight() == 0 && announcer.waiting() == 0) ||
        std::chrono::steady_clock::now() >= drain_deadline)
      return then();
    drain_timer.expires_after(std::chrono::milliseconds(5));
    drain_timer.async_wait([this, then = std::move(then)](const boost::system::error_code&) mutable {
      wait_drained(std::move(then));
    });
  }

  // A table now in its statement's quarantine schema was quarantined: its store row is written
  // from the comment its move left (the catalog is the truth, the store its index).
  void check_outcomes(std::string database, std::vector<PendingOutcome> pending) {
    capture_pool.acquire(database, [this, database, pending = std::move(pending)](ConnPool::Conn conn, std::string err) {
      if (!conn) {
        outcomes_checked(database);
        return spdlog::warn("predrop outcome check: {}", err);
      }
      std::vector<std::optional<std::string>> oids, schemas;
      for (const auto& p : pending) oids.push_back(std::to_string(p.oid)), schemas.push_back(p.quarantine_schema);
      ++counters.catalog;
      conn->exec_prepared("predrop_outcome_check_v5", kOutcomeCheckSql, {pg_array_literal(oids), pg_array_literal(schemas)},
                 [this, conn, database, pending](PgResult r) {
                   capture_pool.release(conn, true);
                   counters.publish(capture_pool);
                   outcomes_checked(database);
                   if (!r.ok()) return spdlog::warn("predrop outcome check failed: {}", r.error);
                   // quarantine_id and hold_id: the comment's, where the table is in its
                   // statement's quarantine schema.
                   struct Found { std::string quarantine_id, table, detail, bytes, schema, hold_id; };
                   std::map<uint32_t, Found> alive;
                   for (int i = 0; i < r.rows(); ++i) {
                     Found f;
                     f.table = r.text(i, 1);
                     f.detail = r.text(i, 2);
                     f.bytes = r.text(i, 3);
                     f.schema = r.text(i, 4);
                     if (r.text(i, 5) == "t") {
                       QuarantineMark mark = quarantine_mark(f.detail);
                       f.quarantine_id = std::move(mark.id);
                       f.hold_id = std::move(mark.hold);
                     }
                     alive[static_cast<uint32_t>(std::stoul(r.text(i, 0)))] = std::move(f);
                   }
                   std::vector<std::string> outcomes, quarantine_ids;
                   // The store rows of the tables found quarantined: one statement for the check,
                   // not one a table (issue 21: each was a statement and a commit of its own). What
                   // the session did not say is NULL, as in the ledger's row.
                   std::array<std::vector<std::optional<std::string>>, 10> rows;
                   constexpr size_t kEventColumn = 6;   // record_each_sql's $7, the DROP's event id
                   std::map<std::string, size_t> row_of;   // by quarantine id
                   // The tree's comment, as the move writes it (jsonb's text: quarantine/move_sql.hpp,
                   // kQuarantineMarkSql); a partition's says "predrop_quarantine_member".
                   static constexpr std::string_view kTreeMark = "\"predrop_quarantine\": 1";
                   auto opt = [](const std::string& v) { return v.empty() ? std::nullopt : std::optional(v); };
                   for (const auto& p : pending) {
                     auto it = alive.find(p.oid);
                     // A quarantine a failed DROP's table is found in is another DROP's, and so is
                     // one whose comment names another hold: this DROP waited on that move's lock
                     // and then found nothing to move (IF EXISTS), or was undone by a ROLLBACK TO
                     // SAVEPOINT before a later DROP moved the table. A comment without a hold
                     // (an older predrop's move) is taken as this DROP's.
                     const bool quarantined = !p.statement_failed && it != alive.end() &&
                                              !it->second.quarantine_id.empty() &&
                                              (it->second.hold_id.empty() || it->second.hold_id == p.hold_id);
                     if (quarantined) {
                       ++counters.quarantined;
                       outcomes.push_back("quarantined");
                       quarantine_ids.push_back(it->second.quarantine_id);
                       const Found& f = it->second;
                       const std::optional<std::string> row[] = {
                           database, f.detail, f.schema, f.table, opt(f.bytes), opt(p.snapshot_id), opt(p.event_id),
                           std::to_string(p.retention_s), opt(p.application_name), opt(p.client_addr)};
                       // A partition's comment only points at its tree's, whose row is the
                       // quarantine's (record_each_sql writes none for it).
                       if (f.detail.find(kTreeMark) == std::string::npos) continue;
                       // Two DROPs claim one quarantine only where the comment names no hold (an
                       // older predrop's move) or the same one (a rolled-back transaction's check,
                       // come after the next transaction's move: proxy/hold.cpp, quarantine_hold_id):
                       // its row is the later's, whose move stood (event ids sort in the order
                       // made), as record_each_sql keeps it.
                       const auto [at, first] = row_of.emplace(f.quarantine_id, rows[0].size());
                       const bool later = !first && rows[kEventColumn][at->second] < row[kEventColumn];
                       for (size_t c = 0; c < rows.size(); ++c) {
                         if (first) rows[c].push_back(row[c]);
                         else if (later) rows[c][at->second] = row[c];
                       }
                       continue;
                     }
                     bool survived = p.statement_failed || it != alive.end();
                     ++(survived ? counters.not_dropped : counters.dropped);
                     outcomes.push_back(survived ? "not_dropped" : "dropped");
                     quarantine_ids.emplace_back();
                   }
                   // A missed snapshot's ledger row may still be on its way (the store that made it
                   // miss may be locked): the update waits for it.
                   std::vector<std::string> event_ids;
                   for (const auto& p : pending)
                     if (p.snapshot_id.empty() && !p.event_id.empty()) event_ids.push_back(p.event_id);
                   auto settle = [this, event_ids = std::move(event_ids), pending, outcomes, quarantine_ids] {
                     ledger.after_insert(event_ids, [this, pending, outcomes, quarantine_ids] {
                       const bool any = !std::all_of(quarantine_ids.begin(), quarantine_ids.end(),
                                                     [](const std::string& q) { return q.empty(); });
                       ledger.exec([pending, outcomes, quarantine_ids, any](const StoreSql& s) {
                         return BatchQuery{any ? "predrop_outcome_quarantined_v1" : "predrop_outcome_v3",
                                           any ? s.outcome_quarantined : s.outcome,
                                           outcome_params(pending, outcomes, quarantine_ids), Plan::follows_growth};
                       }, "outcome update");
                     });
                   };
                   if (rows[0].empty()) return settle();
                   Params params;
                   for (const auto& column : rows) params.push_back(pg_array_literal(column));
                   // The update follows the rows: it reads which DROP each quarantine's row names
                   // (an earlier DROP found quarantined too says not_dropped), and on another store
                   // connection it could overtake them.
                   ledger.exec([params = std::move(params)](const StoreSql& s) {
                     return BatchQuery{"predrop_quarantine_record_each_v2", s.quarantine_record, params};
                   }, "quarantine record", std::move(settle));
                   quarantine::note_table_quarantined(database);
                 });
    });
  }

  // What the proxy hands over off the client's path (afters, outcome checks, ledger rows, hold
  // times) waits in the inbox instead of a post each: on a virtual machine a wake-up of this thread
  // costs more than the work it brings (issue 21: a recreate cycle posted three, each a wake-up and
  // a context switch on both sides). The inbox is emptied, in the order things came, by the next
  // hold as it starts (so a CREATE's after is queued before the DROP's hold looks for it), and
  // otherwise by the sweep that ends each window of background_batch.
  //
  // The window is the only timer of the work off the client's path: at its end the sweep takes the
  // inbox, then starts the outcome checks gathered and writes the copied afters (AfterCapture::
  // end_window). So a check taken by the sweep goes in the same wake-up, and one taken by a hold
  // waits one window at most, as a copy does.
  std::mutex inbox_mutex;
  std::vector<std::function<void()>> inbox;  // guarded by inbox_mutex
  bool window_armed = false;                 // guarded by inbox_mutex: armed, or its arming posted
  // What a take runs, swapped with the inbox: the two vectors keep their capacity, so a steady
  // churn allocates no vector per window.
  std::vector<std::function<void()>> taken;  // event-loop thread only
  asio::steady_timer window_timer{io};

  // From any thread.
  void defer(std::function<void()> fn) {
    bool kick = false;
    {
      std::lock_guard lock(inbox_mutex);
      inbox.push_back(std::move(fn));
      kick = !std::exchange(window_armed, true);
    }
    if (kick) asio::post(io, [this] { arm_window(); });
  }

  // On the event-loop thread: something waits for the window's end (an outcome check, a copy).
  // Stopping, nothing waits for a window: it goes at once.
  void want_window() {
    if (draining) {
      start_outcome_checks();
      afters.end_window();
      announcer.flush();
      return;
    }
    {
      std::lock_guard lock(inbox_mutex);
      if (std::exchange(window_armed, true)) return;
    }
    arm_window();
  }

  void arm_window() {
    window_timer.expires_after(cfg.background_batch);
    window_timer.async_wait([this](const boost::system::error_code& ec) {
      if (!ec) sweep();
    });
  }

  // The windows go on while each brought something to the inbox, and stop after a quiet one (a
  // steady churn then posts no wake-up to arm them). `window_armed` stays set until the window's
  // work is done, so a hand-over racing it posts nothing. What a later answer leaves waiting (an
  // outcome check behind one in flight) asks for a window of its own (want_window).
  void sweep() {
    const bool took = take_inbox() > 0;
    start_outcome_checks();
    afters.end_window();
    announcer.flush();
    bool again = false;
    {
      std::lock_guard lock(inbox_mutex);
      again = took || !inbox.empty();
      window_armed = again;
    }
    if (again) arm_window();
  }

  // Nothing an item runs takes the inbox again (a hold's take runs in a handler of its own).
  // Returns how many items it ran.
  size_t take_inbox() {
    {
      std::lock_guard lock(inbox_mutex);
      taken.swap(inbox);
    }
    for (auto& fn : taken) fn();
    const size_t ran = taken.size();
    taken.clear();
    return ran;
  }

  void shutdown() {
    window_timer.cancel();
    drain_timer.cancel();
    afters.shutdown();
    pipeline.shutdown();
    ledger.shutdown();
    capture_pool.close_all();
    store_pool.close_all();
    counters.publish(capture_pool);
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
  // The hold's own result lets afters still waiting for its tables be written from its before.
  std::string database = request.ctx.database;
  const uint64_t session = request.session;
  impl_->pipeline.submit(std::move(request), [impl = impl_.get(), database = std::move(database), session,
                                              done = std::move(done)](SnapshotResult r) {
    impl->afters.absorb(database, session, r);
    done(std::move(r));
  }, [impl = impl_.get()] { impl->take_inbox(); });
}

void CaptureService::capture_after(SnapshotRequest request) {
  if (impl_->stopped) return;
  impl_->defer([impl = impl_.get(), request = std::move(request)]() mutable {
    impl->afters.submit(std::move(request));
  });
}

void CaptureService::record_event(EventRecord event) {
  if (impl_->stopped) return;
  impl_->defer([impl = impl_.get(), event = std::move(event)] {
    WriteRow row{"", new_uuid(), event.schema, event.table, std::nullopt, event.outcome, event.error, nullptr, {}, {}};
    impl->ledger.write_events({row}, event.ctx, SnapshotReason::pre_drop, event.hold_ms, 0);
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
    cfg.analyze_after_create = next.analyze_after_create;
    cfg.stats_horizon = next.stats_horizon;
  });
}

void CaptureService::confirm_outcomes(std::string database, std::vector<PendingOutcome> pending) {
  if (impl_->stopped) return;
  impl_->defer([impl = impl_.get(), database = std::move(database), pending = std::move(pending)]() mutable {
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
  impl_->defer([impl = impl_.get(), snapshot_ids = std::move(snapshot_ids), event_ids = std::move(event_ids), hold_ms] {
    // after_insert runs this once; the statement's maker is kept for retries, so it holds the ids.
    impl->ledger.after_insert(event_ids, [impl, snapshot_ids, event_ids, hold_ms]() mutable {
      impl->ledger.exec([snapshot_ids = std::move(snapshot_ids), event_ids = std::move(event_ids),
                         hold_ms](const StoreSql& s) {
        // A miss has no snapshot row: leave the snapshot table (perhaps the locked thing) alone.
        const std::string& q = snapshot_ids.empty() ? s.hold_events : s.hold;
        return BatchQuery{snapshot_ids.empty() ? "predrop_hold_events_v1" : "predrop_hold_v1", q,
                          hold_params(snapshot_ids, event_ids, hold_ms), Plan::follows_growth};
      }, "hold update");
    });
  });
}

CaptureStats CaptureService::stats() const {
  const CaptureCounters& c = impl_->counters;
  CaptureStats s;
  s.pool_idle = c.pool_idle;
  s.pool_busy = c.pool_busy;
  s.queued = c.pool_queued;
  s.capture_connections_opened = c.pool_opened;
  s.catalog_queries = c.catalog;
  s.enrich_queries = c.enrich;
  s.store_statements = c.store;
  s.snapshots_written = c.written;
  s.timeouts = c.timeouts;
  s.in_flight = c.in_flight;
  s.dropped = c.dropped;
  s.not_dropped = c.not_dropped;
  s.quarantined = c.quarantined;
  s.store_up = impl_->health.up();
  s.store_last_success_unix_s = impl_->health.last_success_unix_s();
  s.store_retry_queued = c.retry_queued;
  s.store_retry_lost = c.retry_lost;
  s.store_waiting_updates = c.waiting_updates;
  s.afters_queued = c.afters_queued;
  s.afters_written = c.afters_written;
  s.afters_lost = c.afters_lost;
  s.announced = c.announced;
  s.announcements_lost = c.announcements_lost;
  s.stats_waiting = c.stats_waiting;
  s.stats_queries = c.stats_queries;
  s.stats_gave_up = c.stats_gave_up;
  s.afters_absorbed = c.afters_absorbed;
  return s;
}

std::string CaptureService::check_store() const { return impl_->health.check(); }

bool CaptureService::recent_events(int limit, std::string& json, std::string& error) const {
  return read_recent_events(impl_->cfg.store_conninfo, impl_->cfg.events_table, limit, json, error);
}

void CaptureService::stop() {
  if (!impl_ || impl_->stopped.exchange(true)) return;
  asio::post(impl_->io, [impl = impl_.get()] {
    impl->take_inbox();
    impl->drain_then([impl] {
      impl->shutdown();
      impl->work.reset();
      impl->io.stop();
    });
  });
  if (impl_->thread.joinable()) {
    if (impl_->thread.get_id() == std::this_thread::get_id()) impl_->thread.detach();
    else impl_->thread.join();
  }
  impl_->health.stop();
}

}  // namespace predrop::capture
