#include "capture/snapshot_pipeline.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include "capture/catalog_queries.hpp"
#include "quarantine/move_sql.hpp"
#include "quarantine/store_rows.hpp"
#include "capture/store_writer.hpp"

namespace predrop::capture {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

// One snapshot request in flight. Lives on the event-loop thread only.
struct SnapshotJob {
  SnapshotJob(asio::io_context& io, SnapshotRequest r, std::function<void(SnapshotResult)> d)
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
  // Group commit: the leader of a group carries the requests that share its statement (riders);
  // a rider waits for its leader's answer instead of a connection of its own.
  std::vector<JobPtr> riders;
  bool riding = false;
  // What it has learnt so far.
  bool resolved = false;
  CatalogResult catalog;
  std::vector<WriteRow> rows;
  double capture_ms = 0;
  bool yield_done = false;            // its yields' purge ran (or was given up)
  std::vector<YieldedTable> yielded;
  std::string yield_error;
  // The tables its write carries, counted in SnapshotPipeline::writing_ until it ends.
  std::vector<SnapshotPipeline::TableKey> writing;
  // When its statements went and came back (a rider's are its leader's): its CapturePhases.
  Clock::time_point catalog_sent, catalog_answered, write_sent, write_answered;
};

namespace {

double ms_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

double ms_since(Clock::time_point t) { return ms_between(t, Clock::now()); }

CapturePhases phases_of(const SnapshotJob& job) {
  constexpr Clock::time_point never{};
  CapturePhases p;
  if (job.catalog_sent != never) p[CapturePhase::capture_wait] = ms_between(job.started, job.catalog_sent);
  if (job.catalog_answered != never) p[CapturePhase::catalog] = ms_between(job.catalog_sent, job.catalog_answered);
  if (job.write_sent != never)
    p[CapturePhase::store_wait] =
        ms_between(job.catalog_answered != never ? job.catalog_answered : job.started, job.write_sent);
  if (job.write_answered != never) p[CapturePhase::store_write] = ms_between(job.write_sent, job.write_answered);
  return p;
}

void summarise(SnapshotResult& res) {
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

// A row's result before the store answers: a ledger-only row keeps its outcome, a captured one is
// written until the write says otherwise.
TableResult result_of(const WriteRow& row) {
  TableResult t;
  t.schema = row.schema;
  t.table = row.table;
  t.oid = row.oid.value_or(0);
  t.outcome = row.outcome.value_or(SnapshotOutcome::written);
  t.event_id = row.event_id;
  t.error = row.error;
  return t;
}

}  // namespace

SnapshotPipeline::SnapshotPipeline(asio::io_context& io, const CaptureConfig& cfg, ConnPool& capture_pool,
                                   ConnPool& store_pool, LedgerWriter& ledger, Announcer& announcer, StoreHealth& health,
                                   CaptureCounters& counters, LedgerWriter::SqlFor sql_for)
    : io_(io),
      cfg_(cfg),
      capture_pool_(capture_pool),
      store_pool_(store_pool),
      ledger_(ledger),
      announcer_(announcer),
      health_(health),
      counters_(counters),
      sql_for_(std::move(sql_for)) {}

void SnapshotPipeline::submit(SnapshotRequest request, std::function<void(SnapshotResult)> done,
                              std::function<void()> first) {
  ++counters_.in_flight;
  auto job = std::make_shared<SnapshotJob>(io_, std::move(request), std::move(done));
  asio::post(io_, [this, job, first = std::move(first)] {
    if (first) first();
    start(job);
  });
}

// ---- connection handling for a job ----

void SnapshotPipeline::acquire(const JobPtr& job, ConnPool& pool, const std::string& key, std::function<void()> next,
                               bool background) {
  job->waiting_pool = &pool;
  job->ticket = pool.acquire(key, [this, job, &pool, next = std::move(next)](ConnPool::Conn conn, std::string err) {
    job->waiting_pool = nullptr;
    if (job->finished) {  // its deadline passed while the connection was being opened
      if (conn) pool.release(conn, true);
      return;
    }
    if (!conn) {
      fail(job, &pool == &store_pool_ ? SnapshotOutcome::store_error : SnapshotOutcome::capture_error, err);
      return;
    }
    job->conn = std::move(conn);
    job->conn_pool = &pool;
    counters_.publish(capture_pool_);
    next();
  }, background);
  counters_.publish(capture_pool_);
}

void SnapshotPipeline::release(const JobPtr& job, bool reusable) {
  if (!job->conn) return;
  auto conn = std::move(job->conn);
  job->conn = nullptr;
  job->conn_pool->release(conn, reusable);
  counters_.publish(capture_pool_);
}

// A pooled connection the server closed while it sat idle (a restart) fails its next statement:
// that is no fault of the database, so the request moves once to a fresh connection.
bool SnapshotPipeline::retry_if_closed(const JobPtr& job, ConnPool& pool, const std::string& key,
                                       std::function<void()> next) {
  if (!job->conn || job->conn->healthy() || job->retried) return false;
  job->retried = true;
  release(job, false);
  spdlog::info("predrop {} connection was closed by the server; retrying on a new one",
               &pool == &store_pool_ ? "store" : "capture");
  acquire(job, pool, key, std::move(next));
  return true;
}

void SnapshotPipeline::run(const JobPtr& job, const BatchQuery& q, std::function<void(PgResult)> next) {
  auto cb = [job, next = std::move(next)](PgResult r) {
    if (job->finished) return;
    next(std::move(r));
  };
  if (q.name) job->conn->exec_prepared(q.name, q.sql, q.params, std::move(cb), q.plan);
  else job->conn->exec(q.sql, q.params, std::move(cb));
}

// ---- the request ----

void SnapshotPipeline::start(JobPtr job) {
  jobs_.insert(job);
  auto deadline = job->req.deadline == Clock::time_point{} ? job->started + cfg_.default_deadline : job->req.deadline;
  job->timer.expires_at(deadline);
  job->timer.async_wait([this, job](const boost::system::error_code& ec) {
    if (!ec) fail(job, SnapshotOutcome::timeout, "deadline passed");
  });
  if (job->req.targets.empty() && job->req.yields.empty()) return write(job);
  start_capture(job);
}

// Holds that wait for a capture connection at the same moment share one: whichever gets it first
// reads the catalog for all of them in one statement (the group's targets in a row), and their
// writes share one store statement the same way (write). Afters (background) wait apart, and so
// do requests needing their own statement on the connection (the quarantine's preparation) or
// an enrichment query of their own.
void SnapshotPipeline::start_capture(const JobPtr& job) {
  if (groupable(job)) capture_waiting_.push_back(job);
  acquire(job, capture_pool_, job->req.ctx.database, [this, job] {
    forget(capture_waiting_, job);
    gather(job, capture_waiting_, capture_pool_, [&](const JobPtr& w) {
      return w->req.ctx.database == job->req.ctx.database && w->req.search_path == job->req.search_path &&
             w->req.ctx.session_user == job->req.ctx.session_user;
    });
    prepare(job);
  }, job->req.background);
}

bool SnapshotPipeline::groupable(const JobPtr& job) const {
  if (job->req.background || !job->req.yields.empty() || !cfg_.enrich_identity_sql.empty() ||
      !cfg_.enrich_provenance_sql.empty())
    return false;
  return !job->req.prepare || prepared_.count(job->req.ctx.database + '\n' + job->req.prepare->id) > 0;
}

void SnapshotPipeline::forget(std::vector<JobPtr>& waiting, const JobPtr& job) {
  waiting.erase(std::remove(waiting.begin(), waiting.end(), job), waiting.end());
}

void SnapshotPipeline::forget_finished(std::vector<JobPtr>& jobs) {
  jobs.erase(std::remove_if(jobs.begin(), jobs.end(), [](const JobPtr& j) { return j->finished; }), jobs.end());
}

// The waiting requests that fit the leader's statement leave the pool's queue and ride with it,
// in arrival order, up to kGroupMax requests.
void SnapshotPipeline::gather(const JobPtr& leader, std::vector<JobPtr>& waiting, ConnPool& pool,
                              const std::function<bool(const JobPtr&)>& fits) {
  if (!groupable(leader)) return;
  for (auto it = waiting.begin(); it != waiting.end() && leader->riders.size() + 1 < kGroupMax;) {
    const JobPtr& w = *it;
    if (w->finished || w->waiting_pool != &pool || !groupable(w) || !fits(w)) {
      ++it;
      continue;
    }
    pool.cancel(w->ticket);
    w->waiting_pool = nullptr;
    w->riding = true;
    leader->riders.push_back(w);
    it = waiting.erase(it);
  }
  counters_.publish(capture_pool_);
}

// A leader that ended without its group's answer (its deadline, a failure of its own) lets its
// riders go on by themselves.
void SnapshotPipeline::let_riders_go(const JobPtr& leader) {
  auto riders = std::move(leader->riders);
  leader->riders.clear();
  for (const auto& r : riders) {
    if (r->finished) continue;
    r->riding = false;
    if (r->resolved) write(r);
    else start_capture(r);
  }
}

// Capture connections are read-only by default: `body` runs its statements between the two SETs
// and calls `done` once finished, whatever they answered; `next` runs on the read-only connection.
void SnapshotPipeline::writable(const JobPtr& job, std::function<void(std::function<void()> done)> body,
                                std::function<void()> next) {
  run(job, BatchQuery{nullptr, "SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE", {}},
      [this, job, body = std::move(body), next = std::move(next)](PgResult) mutable {
        body([this, job, next = std::move(next)]() mutable {
          run(job, BatchQuery{nullptr, "SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY", {}},
              [next = std::move(next)](PgResult) { next(); });
        });
      });
}

void SnapshotPipeline::prepare(const JobPtr& job) {
  if (!job->req.yields.empty() && !job->yield_done) return yield(job);
  if (job->req.targets.empty()) {  // a yield alone: nothing to capture
    release(job);
    job->capture_ms = ms_since(job->started);
    return finish(job, SnapshotResult{});
  }
  if (!job->req.prepare) return read_catalog(job);
  // Once per session, not once per name: a database dropped and made again under its name took
  // its sessions with it, and the schema and function with them; the process-wide note would have
  // sent every later DROP there to a function that is not there, and to a real DROP.
  const std::string& in_session = job->req.prepare->id;
  if (job->conn->done_in_session(in_session)) return read_catalog(job);
  std::string key = job->req.ctx.database + '\n' + in_session;
  writable(job, [this, job, key, in_session](std::function<void()> done) {
    run(job, BatchQuery{nullptr, job->req.prepare->sql, {}}, [this, job, key, in_session, done](PgResult r) {
      // A failure is logged, not the capture's: the snapshot goes on, and the quarantine that
      // needed the preparation falls back to the real statement by itself.
      if (!r.ok()) {
        spdlog::warn("predrop quarantine schema in database {}: {}", job->req.ctx.database, r.error);
        return done();
      }
      prepared_.insert(key);
      job->conn->note_done_in_session(in_session);
      // Whether the later DROPs of this database may call the move's function.
      run(job, BatchQuery{nullptr, quarantine::move_function_check_sql(), {}}, [job, done](PgResult check) {
        const bool usable = check.ok() && check.rows() == 1 && check.text(0, 0) == "t";
        quarantine::note_move_function(job->req.ctx.database, usable);
        if (!usable)
          spdlog::info("predrop quarantine in database {}: the move runs inline (its function {})",
                       job->req.ctx.database, check.ok() ? "is not installed for every role" : check.error);
        done();
      });
    });
  }, [this, job] { read_catalog(job); });
}

// The quarantined tables that use what the statement drops are purged before it runs (issue 22): one
// read-only statement finds them (nothing found, the usual case, is that one round trip), one DROP
// removes them all. The capture role owns the quarantine schema, so it may drop any table in it. A
// failure is logged and the statement goes on: it then fails as it would have without the yield.
void SnapshotPipeline::yield(const JobPtr& job) {
  job->yield_done = true;
  std::vector<std::optional<std::string>> kinds, names, schemas, methods, path;
  for (const auto& y : job->req.yields) {
    kinds.emplace_back(std::string(to_string(y.kind)));
    names.emplace_back(y.name);
    schemas.emplace_back(y.schema);
    methods.emplace_back(y.method);
  }
  path.emplace_back("pg_catalog");
  for (const auto& s : job->req.search_path) path.emplace_back(s);
  Params params{job->req.yield_schema, pg_array_literal(kinds), pg_array_literal(names), pg_array_literal(schemas),
                pg_array_literal(methods), pg_array_literal(path)};
  ++counters_.catalog;
  run(job, BatchQuery{"predrop_quarantine_yield_v2", quarantine::yield_find_sql(), std::move(params)}, [this, job](PgResult r) {
    if (!r.ok()) {
      // On a fresh connection the yield runs again (the connection may be handed over at once).
      job->yield_done = false;
      if (retry_if_closed(job, capture_pool_, job->req.ctx.database, [this, job] { prepare(job); })) return;
      job->yield_done = true;
      job->yield_error = "finding the quarantined tables it would meet: " + r.error;
      spdlog::warn("predrop quarantine yield in database {}: {}", job->req.ctx.database, job->yield_error);
      return prepare(job);
    }
    std::vector<PurgedTable> found;
    std::string drop;
    for (int i = 0; i < r.rows(); ++i) {
      if (r.is_null(i, 3)) continue;
      const size_t n = static_cast<size_t>(std::stoul(r.text(i, 0)));
      if (n == 0 || n > job->req.yields.size()) continue;
      // Only what a quarantine put there (its comment says so); anything else in the schema is not ours.
      std::string detail = r.text(i, 3);
      const auto d = nlohmann::json::parse(detail, nullptr, false);
      if (!d.is_object() || !d.contains("predrop_quarantine")) continue;
      YieldedTable t{job->req.yields[n - 1].kind, d.value("schema", ""), d.value("table", ""), r.text(i, 2),
                     static_cast<uint32_t>(std::stoul(r.text(i, 1)))};
      drop += (drop.empty() ? "DROP TABLE " : ", ") + quarantine::quote_ident_always(job->req.yield_schema) + "." +
              quarantine::quote_ident_always(t.quarantine_table);
      found.push_back({std::move(t), std::move(detail)});
    }
    if (found.empty()) return prepare(job);
    // CASCADE: a foreign key between two tables quarantined together goes with the first (as the
    // purger does); nothing outside the quarantine depends on a quarantined table.
    drop += " CASCADE";
    writable(job, [this, job, drop, found = std::move(found)](std::function<void()> done) mutable {
      run(job, BatchQuery{nullptr, drop, {}}, [this, job, found = std::move(found), done](PgResult d) mutable {
        if (d.ok()) {
          record_yielded(job, found);
          for (auto& p : found) job->yielded.push_back(std::move(p.table));
        } else {
          job->yield_error = "purging the quarantined tables it would meet: " + d.error;
          spdlog::warn("predrop quarantine yield in database {}: {}", job->req.ctx.database, job->yield_error);
        }
        done();
      });
    }, [this, job] { prepare(job); });
  });
}

// Each purged table: a ledger row saying to what it yielded, and its store row marked purged.
void SnapshotPipeline::record_yielded(const JobPtr& job, const std::vector<PurgedTable>& purged) {
  const std::string reason = "yielded to " + job->req.ctx.statement;
  std::vector<WriteRow> rows;
  for (const PurgedTable& p : purged) {
    const YieldedTable& t = p.table;
    rows.push_back(WriteRow{"", new_uuid(), t.schema, t.table, t.oid, SnapshotOutcome::yielded,
                            reason + " (purged " + job->req.yield_schema + "." + t.quarantine_table + ")", nullptr, {}, {}});
    Params params{job->req.ctx.database, p.detail, job->req.yield_schema, t.quarantine_table,
                  std::nullopt, std::nullopt, std::nullopt, std::string("0"), job->req.ctx.application_name,
                  job->req.ctx.client_addr, reason};
    ledger_.exec([params = std::move(params)](const StoreSql&) {
      return BatchQuery{"predrop_quarantine_yielded_v1", quarantine::yielded_sql(quarantine::kQuarantineStoreTable), params};
    }, "quarantine yield");
  }
  ledger_.write_events(std::move(rows), job->req.ctx, job->req.reason, std::nullopt, ms_since(job->started));
}

void SnapshotPipeline::read_catalog(const JobPtr& job) {
  ++counters_.catalog;
  // The group's targets in a row: the leader's, then each rider's.
  SnapshotRequest merged;
  const SnapshotRequest* req = &job->req;
  if (!job->riders.empty()) {
    merged = job->req;
    for (const auto& r : job->riders)
      merged.targets.insert(merged.targets.end(), r->req.targets.begin(), r->req.targets.end());
    req = &merged;
  }
  const size_t total = req->targets.size();
  job->catalog_sent = Clock::now();
  run(job, capture_query(*req, cfg_.bounds, cfg_.naive_array_split), [this, job, total](PgResult r) {
    job->catalog_answered = Clock::now();
    if (!r.ok()) {
      if (retry_if_closed(job, capture_pool_, job->req.ctx.database, [this, job] { read_catalog(job); })) return;
      auto riders = std::move(job->riders);
      job->riders.clear();
      for (const auto& rider : riders) fail(rider, SnapshotOutcome::capture_error, "catalog: " + r.error);
      return fail(job, SnapshotOutcome::capture_error, "catalog: " + r.error);
    }
    CatalogResult all = parse_capture(r, total, cfg_.bounds, cfg_.naive_array_split);
    auto riders = std::move(job->riders);
    job->riders.clear();
    size_t offset = job->req.targets.size();
    // What a member learnt: its schema hashes, and which tables are too wide for a profile.
    auto resolved = [this](const JobPtr& m, CatalogResult catalog) {
      m->catalog = std::move(catalog);
      m->resolved = true;
      for (auto& t : m->catalog.tables) {
        std::vector<std::string> names;
        for (const auto& c : t.snap.columns) names.push_back(c.name);
        t.snap.schema_hash = schema_hash(std::move(names), cfg_.hash_excluded);
      }
      mark_profile_skipped(m->catalog.tables, cfg_.bounds);
    };
    // A member's share of the group's answer: its targets' slice, renumbered from 0.
    auto share = [&all](size_t from, size_t n) {
      CatalogResult mine;
      mine.target_found.assign(all.target_found.begin() + static_cast<long>(from),
                               all.target_found.begin() + static_cast<long>(from + n));
      for (const auto& t : all.tables) {
        std::vector<int> indexes;
        for (int i : t.target_indexes)
          if (i >= static_cast<int>(from) && i < static_cast<int>(from + n)) indexes.push_back(i - static_cast<int>(from));
        if (indexes.empty()) continue;
        mine.tables.push_back(t);
        mine.tables.back().target_indexes = std::move(indexes);
      }
      mine.server = all.server;
      return mine;
    };
    for (const auto& rider : riders) {
      if (!rider->finished) {
        rider->catalog_sent = job->catalog_sent;
        rider->catalog_answered = job->catalog_answered;
        resolved(rider, share(offset, rider->req.targets.size()));
        rider->riding = false;
        rider->capture_ms = ms_since(rider->started);
      }
      offset += rider->req.targets.size();
    }
    if (riders.empty()) resolved(job, std::move(all));
    else resolved(job, share(0, job->req.targets.size()));
    enrich(job, 0);
    for (const auto& rider : riders)
      if (!rider->finished) write(rider);
  });
}

// Enrichment is best effort: a failing or missing query never stops the snapshot.
void SnapshotPipeline::enrich(const JobPtr& job, int which) {
  const std::string* user_sql =
      which == 0 ? &cfg_.enrich_identity_sql : which == 1 ? &cfg_.enrich_provenance_sql : nullptr;
  if (!user_sql) {
    release(job);
    job->capture_ms = ms_since(job->started);
    return write(job);
  }
  auto q = enrich_query(*user_sql, job->catalog.tables);
  if (!q) return enrich(job, which + 1);
  ++counters_.enrich;
  run(job, *q, [this, job, which](PgResult r) {
    if (r.ok()) apply_enrichment(r, job->catalog.tables);
    else spdlog::debug("predrop enrichment query failed (snapshot goes on without it): {}", r.error);
    enrich(job, which + 1);
  });
}

// The rows this request writes: one per captured table, one per target that found nothing.
// With a failure, every row carries it; without, captured tables are left to the write to decide.
void SnapshotPipeline::build_rows(const JobPtr& job, std::optional<SnapshotOutcome> failure, const std::string& error) {
  job->rows.clear();
  const auto& req = job->req;
  if (job->resolved) {
    for (const auto& t : job->catalog.tables) {
      WriteRow row{new_uuid(), new_uuid(), t.snap.schema_name, t.snap.table_name, t.snap.table_oid, failure, error, &t, {}, {}};
      if (!t.target_indexes.empty()) row.pair_hint = req.targets[static_cast<size_t>(t.target_indexes.front())].pair_hint;
      job->rows.push_back(std::move(row));
    }
  }
  for (size_t i = 0; i < req.targets.size(); ++i) {
    if (job->resolved && job->catalog.target_found[i]) continue;
    const auto& t = req.targets[i];
    WriteRow row{"", new_uuid(), "", "", std::nullopt, failure.value_or(SnapshotOutcome::table_missing), error, nullptr, {}, {}};
    if (t.kind == TargetKind::schema) row.schema = t.name;
    else if (t.kind != TargetKind::owned_by) row.schema = t.schema, row.table = t.name;
    job->rows.push_back(std::move(row));
  }
}

void SnapshotPipeline::write(const JobPtr& job) {
  build_rows(job, std::nullopt, "");
  // An after whose tables are all gone writes nothing (its ledger rows would be left out too).
  if (is_after(job->req.reason) &&
      std::none_of(job->rows.begin(), job->rows.end(), [](const WriteRow& w) { return w.captured != nullptr; })) {
    SnapshotResult res;
    for (const auto& row : job->rows) res.tables.push_back(result_of(row));
    return finish(job, std::move(res));
  }
  // A leader whose write was deferred (send_write) keeps its riders, and rides with no one.
  if (groupable(job) && job->riders.empty()) store_waiting_.push_back(job);
  acquire(job, store_pool_, "", [this, job] {
    forget(store_waiting_, job);
    gather(job, store_waiting_, store_pool_, [](const JobPtr&) { return true; });
    send_write(job);
  });
}

// One statement for the leader's rows and its riders', in that order; each request gets its own
// rows' answers back.
void SnapshotPipeline::send_write(const JobPtr& job) {
  if (meets_other_write(job)) {
    release(job);
    writes_deferred_.push_back(job);
    return;
  }
  const StoreSql& sql = sql_for_(*job->conn);
  ++counters_.store;
  // A rider whose deadline passed meanwhile has its ledger rows already (fail).
  forget_finished(job->riders);
  std::vector<JobPtr> group{job};
  group.insert(group.end(), job->riders.begin(), job->riders.end());
  for (const auto& m : group) {
    begin_write(m);
    date_before_meanwhile(m);
  }
  std::vector<WriteGroup> groups;
  for (const auto& m : group)
    groups.push_back({&m->rows, &m->req.ctx, m->req.reason, m->capture_ms, m->req.profile_of,
                      m->resolved ? m->catalog.server : std::string()});
  // Prepared once per store connection: planning the write costs more than running it.
  const bool befores_only = std::all_of(group.begin(), group.end(), [](const JobPtr& m) {
    return m->req.reason == SnapshotReason::pre_drop &&
           std::all_of(m->rows.begin(), m->rows.end(), [](const WriteRow& r) { return r.dated_before.empty(); });
  });
  BatchQuery q{befores_only ? "predrop_store_write_befores_v2" : "predrop_store_write_v5",
               befores_only ? sql.write_befores : sql.write, write_params(groups, cfg_)};
  const auto sent = Clock::now();
  for (const auto& m : group) m->write_sent = sent;
  run(job, q, [this, job](PgResult r) {
    if (!r.ok() && retry_if_closed(job, store_pool_, "", [this, job] { send_write(job); })) return;
    release(job);
    std::vector<JobPtr> group{job};
    group.insert(group.end(), job->riders.begin(), job->riders.end());
    job->riders.clear();
    const auto answered = Clock::now();
    for (const auto& m : group) m->write_answered = answered;
    if (!r.ok()) {
      for (const auto& m : group) m->riding = false;
      for (const auto& m : group) fail(m, SnapshotOutcome::store_error, r.error);
      return;
    }
    health_.note(true, {});
    int at = 0;
    for (const auto& m : group) {
      m->riding = false;
      SnapshotResult res;
      for (size_t k = 0; k < m->rows.size(); ++k, ++at) {
        if (at >= r.rows()) break;
        const WriteRow& row = m->rows[k];
        TableResult t = result_of(row);
        if (!row.outcome) {
          if (r.text(at, 1) == "t") {
            t.outcome = SnapshotOutcome::written;
            t.snapshot_id = row.snapshot_id;
            t.stats_available = row.captured && row.captured->snap.stats_available;
            // Its shape came from a later DROP's before: that table is gone, nothing to wait for.
            if (r.text(at, 5) == "t") t.oid = 0;
            ++counters_.written;
          } else {
            t.outcome = SnapshotOutcome::deduplicated;
            t.snapshot_id = r.is_null(at, 2) ? "" : r.text(at, 2);
          }
        }
        res.tables.push_back(std::move(t));
      }
      finish(m, std::move(res));
    }
    // Queued once every hold of the group has its answer: queueing may arm the window's timer.
    for (int i = 0; i < r.rows(); ++i)
      if (r.text(i, 1) == "t" && !r.is_null(i, 7)) announcer_.add(r.text(i, 7));
  });
}

// An after's write and a hold's write of the same table never run at once. On two store
// connections the server may start them in either order, so an after could be dated later than
// the before of the DROP that ended its table without seeing that before, and the next recreate's
// after would then pair with nothing (tests/after/test_churn_pairs.py, racing). Whichever comes
// second waits for the first to end: an after waits off every client's path, a hold only when an
// after of its very table is being written (a table recreated and dropped at once), for one write.
bool SnapshotPipeline::meets_other_write(const JobPtr& job) const {
  if (writing_.empty()) return false;
  auto meets = [&](const JobPtr& m) {
    return std::any_of(m->rows.begin(), m->rows.end(), [&](const WriteRow& row) {
      if (!row.captured) return false;
      auto it = writing_.find({m->req.ctx.database, row.captured->snap.table_oid});
      return it != writing_.end() && (m->req.background ? it->second.holds : it->second.afters) > 0;
    });
  };
  return meets(job) || std::any_of(job->riders.begin(), job->riders.end(), meets);
}

void SnapshotPipeline::begin_write(const JobPtr& job) {
  if (!job->writing.empty()) return;
  for (const auto& row : job->rows) {
    if (!row.captured) continue;
    job->writing.push_back({job->req.ctx.database, row.captured->snap.table_oid});
    auto& w = writing_[job->writing.back()];
    ++(job->req.background ? w.afters : w.holds);
  }
}

// The writes deferred for this one go on (write, which checks again).
void SnapshotPipeline::end_write(const JobPtr& job) {
  if (job->writing.empty()) return;
  for (const auto& key : job->writing) {
    auto it = writing_.find(key);
    if (it == writing_.end()) continue;
    --(job->req.background ? it->second.afters : it->second.holds);
    if (it->second.afters <= 0 && it->second.holds <= 0) writing_.erase(it);
  }
  job->writing.clear();
  auto deferred = std::move(writes_deferred_);
  writes_deferred_.clear();
  for (const auto& w : deferred)
    if (!w->finished) write(w);
}

// Read at send time: the hold's before may have been written while this after waited for a
// store connection or for that hold's write.
void SnapshotPipeline::date_before_meanwhile(const JobPtr& job) {
  if (!job->req.befores_meanwhile) return;
  const auto& befores = *job->req.befores_meanwhile;
  for (auto& row : job->rows)
    if (row.captured && !row.captured->target_indexes.empty()) {
      const auto i = static_cast<size_t>(row.captured->target_indexes.front());
      if (i < befores.size()) row.dated_before = befores[i];
    }
}

// ---- ends of a request ----

void SnapshotPipeline::finish(const JobPtr& job, SnapshotResult res) {
  if (job->finished) return;
  job->finished = true;
  job->timer.cancel();
  jobs_.erase(job);
  --counters_.in_flight;
  res.capture_ms = ms_since(job->started);
  res.phases = phases_of(*job);
  summarise(res);
  res.yielded = job->yielded;
  res.yield_error = job->yield_error;
  try {
    job->done(std::move(res));
  } catch (const std::exception& e) {
    spdlog::error("predrop capture callback threw: {}", e.what());
  }
  end_write(job);
}

// A failure ends the request at once, then its ledger rows are written (best effort).
void SnapshotPipeline::fail(const JobPtr& job, SnapshotOutcome outcome, const std::string& error) {
  if (job->finished) return;
  if (outcome == SnapshotOutcome::timeout) ++counters_.timeouts;
  if (outcome == SnapshotOutcome::store_error) health_.note(false, error);
  if (job->waiting_pool) {
    job->waiting_pool->cancel(job->ticket);
    job->waiting_pool = nullptr;
  }
  forget(capture_waiting_, job);
  forget(store_waiting_, job);
  forget(writes_deferred_, job);
  // A connection busy for this request may be stuck (a slow store, a lock): cancel and close it.
  if (job->conn) release(job, !job->conn->busy());
  spdlog::warn("predrop snapshot {} for {} target(s) in database '{}': {}", to_string(outcome), job->req.targets.size(),
               job->req.ctx.database, error);
  build_rows(job, outcome, error);
  SnapshotResult res;
  for (const auto& row : job->rows)
    res.tables.push_back(result_of(row));
  auto rows = job->rows;
  finish(job, std::move(res));
  ledger_.write_events(std::move(rows), job->req.ctx, job->req.reason, std::nullopt, job->capture_ms);
  let_riders_go(job);
}

void SnapshotPipeline::shutdown() {
  for (auto job : std::set<JobPtr>(jobs_)) fail(job, SnapshotOutcome::capture_error, "capture service stopped");
}

}  // namespace predrop::capture
