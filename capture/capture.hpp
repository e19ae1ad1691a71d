// capture/ — everything predrop does on its own connections: resolving names, reading the
// catalog, building snapshots, writing snapshot and ledger rows, confirming outcomes.
// It knows libpq; it does not know the client's protocol. Pure functions over snapshots
// (hash, array text, diff) live in capture/snapshot.hpp.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "capture/outcome.hpp"
#include "capture/snapshot.hpp"
#include "capture/target.hpp"

namespace predrop::capture {

struct CaptureConfig {
  std::string capture_conninfo;       // no dbname: the client's database is added per request
  std::string store_conninfo;         // where snapshot and ledger rows are written
  std::string store_table = "predrop.schema_snapshots";
  std::string events_table = "predrop.drop_events";
  int pool_size = 4;                  // hard maximum of capture connections, all databases together
  std::chrono::seconds idle_close{60};  // capture and store connections idle this long close (0: never)
  ProfileBounds bounds;               // 20 values / 120 chars / 300 columns
  std::vector<std::string> hash_excluded = {"_source_dataset_id", "_ingested_at", "_source_url"};
  bool naive_array_split = false;     // reproduce the reference's comma split (shared stores)
  int dedup_window_s = 0;             // 0: off
  std::string enrich_identity_sql;    // optional, $1 schema $2 table -> resource_identity, version
  std::string enrich_provenance_sql;  // optional, $1 schema $2 table -> provenance columns
  std::string actor = "predrop";
  // Added by capture/: bounds on predrop's own statements and the store's pool.
  int store_pool_size = 2;                 // store connections, separate from pool_size
  int capture_statement_timeout_ms = 5000; // catalog reads never wait on a table lock: lock_timeout
  int capture_lock_timeout_ms = 500;       // is set too, but catalog reads take none
  int store_statement_timeout_ms = 10000;
  // Ledger statements the store could not take (down, connection lost) wait here and are retried
  // with backoff; past this many the oldest is dropped and counted.
  int store_retry_max = 1000;
  // Hold updates waiting for their ledger row's INSERT to finish; past this many a new one is
  // dropped and counted with the retry queue's losses.
  int store_waiters_max = 1000;
  std::chrono::milliseconds default_deadline{30000};  // when a request carries no deadline
  // With no snapshot write for this long, a thread of its own checks that the store is writable.
  std::chrono::milliseconds store_check_interval{10000};
  // Afters (capture_after): at most this many wait to run, and this many run at once (0: half the
  // pool, at least one), so that holds always find a capture connection soon.
  size_t after_queue_max = 10000;
  int after_concurrency = 0;
  // An after waits this long for a hold of its table to absorb it: a table recreated and dropped
  // within it (ingestion churn) has its shape read once, by the DROP's before.
  std::chrono::milliseconds after_delay{1000};
  // The window of the work off the client's path: at its end the service's sweep
  // (capture_service.cpp) empties the inbox, unless a hold did first, and the outcome checks and
  // copied afters gathered in it go as one statement each: a churn's are one per window, not per DROP.
  // 100 ms, not 20: a recreate churn of one client (tests/bench/churn) ran a window's three
  // statements every 4 cycles at 20 ms and every 20 at 100, and predrop's CPU a cycle fell by about
  // a tenth. An outcome or a copy 80 ms later matters to no one: an after already waits after_delay.
  std::chrono::milliseconds background_batch{100};
  bool analyze_after_create = false;
  std::chrono::seconds stats_horizon{3600};        // 0: an after never waits for statistics
  std::chrono::milliseconds stats_poll{5000};
  size_t stats_waiting_max = 10000;
};

// What the proxy saw a statement destroy, in capture's own terms (capture does not know parser/).
struct TargetSpec {
  TargetKind kind = TargetKind::relation;
  std::string schema;               // empty: resolve through search_path as the server would
  std::string name;                 // relation name; schema: the schema name
  std::vector<std::string> roles;   // owned_by
  // An after: the before it completes, when the proxy knows it (the hold of its own ALTER, the
  // DROP before a recreate); else the store pairs by OID or name (store_writer.cpp).
  std::string pair_hint;
  uint32_t oid = 0;                 // after_by_oid: the table, whatever its name is now (schema, name: what it was called)
};

// An object a later statement drops that a quarantined table may still use: the quarantined tables
// that use it are purged for good before the statement runs (issue 22).
struct YieldSpec {
  YieldKind kind = YieldKind::role;
  std::string name;
  std::string schema;   // operator class / family: as qualified, else empty (the search_path's)
  std::string method;   // operator class / family: USING
};

// A quarantined table a yield purged.
struct YieldedTable {
  YieldKind to = YieldKind::role;  // what the statement it yielded to drops
  std::string schema, table;     // what it was called before its DROP
  std::string quarantine_table;  // in the yield's quarantine schema
  uint32_t oid = 0;
};

// Who and what, copied onto every snapshot and ledger row.
struct StatementContext {
  std::string database;
  std::string session_user;
  std::string application_name;
  std::string client_addr;
  std::string statement_kind;       // the first target's kind
  std::string statement;            // normalised text (no literals)
  std::string fingerprint;
};

// What a request runs before its catalog read where it is not yet done (SnapshotRequest::prepare).
struct PrepareStep {
  std::string sql;
  std::string id;  // short, and the same for the same text: the name it is marked done under
};

struct SnapshotRequest {
  StatementContext ctx;
  std::vector<std::string> search_path;  // effective schemas for unqualified names, in order
  std::vector<TargetSpec> targets;
  std::chrono::steady_clock::time_point deadline;
  SnapshotReason reason = SnapshotReason::pre_drop;
  std::string profile_of;            // post_analyze: the after whose profile this completes
  bool background = false;           // an after: capture connections go to holds first
  // Run on the capture connection before the catalog read, once per capture session while it
  // succeeds: the quarantine schema a quarantined DROP moves its tables into must exist first.
  // Shared and built once per schema (proxy/hold.cpp): its text is about 30 KB, which every
  // quarantined DROP built, copied and hashed on the hold path when it was a string of its own.
  std::shared_ptr<const PrepareStep> prepare;
  // The client session it came from (0: none). A hold's before absorbs the session's own afters of
  // the same name still waiting to run (capture/after_capture.hpp).
  uint64_t session = 0;
  // An after's, shared with capture/after_capture.cpp: per target, the id of a hold's before of
  // that table written while the after was being read (empty: none). If the table is gone by the
  // read, the after is that before's copy; if not, it is dated just before it (the before is the
  // later statement's).
  std::shared_ptr<std::vector<std::string>> befores_meanwhile;
  // Quarantined tables in yield_schema that use what these drop are purged first (capture's
  // connection, which owns the quarantine schema), each with a ledger row saying to what it yielded.
  std::vector<YieldSpec> yields;
  std::string yield_schema;
};

// One per table captured or attempted. outcome: written | table_missing | capture_error |
// store_error | timeout | deduplicated.
struct TableResult {
  std::string schema;
  std::string table;
  uint32_t oid = 0;
  SnapshotOutcome outcome = SnapshotOutcome::capture_error;
  std::string snapshot_id;   // uuid text when written
  std::string event_id;      // the ledger row
  std::string error;
  bool stats_available = false;   // written with a pg_stats profile
};

// Where a request's capture_ms went, phase by phase.
enum class CapturePhase : uint8_t {
  capture_wait,  // until its catalog statement was sent: a capture connection, its group's leader,
                 // the quarantine's preparation or yields
  catalog,       // the catalog statement, sent to answered
  store_wait,    // until its store statement was sent: its rows, a store connection
  store_write,   // the store statement, sent to answered
};
// Each phase's name, in CapturePhase's order (predrop_capture_phase_seconds's label values).
inline constexpr std::array<const char*, 4> kCapturePhaseNames{"capture_wait", "catalog", "store_wait", "store_write"};
static_assert(kCapturePhaseNames.size() == static_cast<size_t>(CapturePhase::store_write) + 1,
              "a name for every CapturePhase");
// Milliseconds by CapturePhase; a phase the request never reached stays negative.
struct CapturePhases {
  CapturePhases() { ms.fill(-1); }
  std::array<double, kCapturePhaseNames.size()> ms;
  double& operator[](CapturePhase p) { return ms[static_cast<size_t>(p)]; }
};

struct SnapshotResult {
  std::vector<TableResult> tables;
  // written when every table that exists has its row; else the first failure
  SnapshotOutcome outcome = SnapshotOutcome::capture_error;
  double capture_ms = 0;
  CapturePhases phases;
  std::string error;
  std::vector<YieldedTable> yielded;   // quarantined tables purged for the request's yields
  std::string yield_error;             // the purge failed: the statement goes on as it would have
  bool ok() const { return is_kept(outcome); }
};

// A ledger row for an intercepted statement that never reached a capture
// (policy_skip, disabled, unresolved, unparsed) or that the proxy released itself (timeout).
struct EventRecord {
  StatementContext ctx;
  SnapshotOutcome outcome = SnapshotOutcome::capture_error;
  std::string schema;
  std::string table;
  double hold_ms = 0;
  std::string error;
};



struct CaptureStats {
  uint64_t pool_idle = 0, pool_busy = 0, queued = 0;
  // Added by capture/: counters since start.
  uint64_t catalog_queries = 0;      // catalog + pg_stats statements sent to capture connections
  uint64_t enrich_queries = 0;
  uint64_t store_statements = 0;
  uint64_t capture_connections_opened = 0;
  uint64_t snapshots_written = 0;
  uint64_t timeouts = 0;
  uint64_t in_flight = 0;            // requests accepted, done() not yet called
  uint64_t dropped = 0;              // outcome checks: the table is gone
  uint64_t not_dropped = 0;          // outcome checks: the table survived (rollback, failed statement)
  uint64_t quarantined = 0;          // outcome checks: the table is in the quarantine schema
  // The store as the last snapshot write, failed store write or store check found it.
  bool store_up = false;
  double store_last_success_unix_s = 0;  // 0: never
  uint64_t store_retry_queued = 0;   // ledger statements waiting for the store now
  uint64_t store_retry_lost = 0;     // ledger statements dropped because that queue (or the waiters) was full
  uint64_t store_waiting_updates = 0;  // hold updates waiting for their ledger row's INSERT now
  uint64_t afters_queued = 0;        // afters waiting or running now
  uint64_t afters_written = 0;       // after snapshots written (post_create, post_alter, post_analyze)
  uint64_t afters_lost = 0;          // afters refused because their queue was full (each has a ledger row)
  uint64_t stats_waiting = 0;        // afters waiting for statistics now
  uint64_t stats_queries = 0;        // pg_stat_user_tables checks sent (one per database and period)
  uint64_t stats_gave_up = 0;        // afters that kept their shape alone: horizon or bound reached
  uint64_t afters_absorbed = 0;      // afters written as a copy of a later hold's before of the same table
  uint64_t announced = 0;            // written rows announced on the snapshot channel (capture/announcer.hpp)
  uint64_t announcements_lost = 0;   // announcements dropped: too many waited for a store that did not answer
};

// Asynchronous, bounded. Runs its own event loop thread driving libpq's non-blocking API;
// callbacks run on that thread, so callers post back to their own executor.
class CaptureService {
 public:
  explicit CaptureService(CaptureConfig cfg);
  ~CaptureService();
  CaptureService(const CaptureService&) = delete;
  CaptureService& operator=(const CaptureService&) = delete;

  // Resolve, capture and write every target, then call done exactly once.
  // Past the deadline the work is abandoned, ledger rows say timeout, done still runs.
  void snapshot(SnapshotRequest request, std::function<void(SnapshotResult)> done);
  void record_event(EventRecord event);
  // A transaction that created or changed these tables committed: capture their new shape
  // (request.reason post_create or post_alter), paired with their before, off the client's path.
  // Fire and forget: a change that gets no after has a ledger row saying why.
  void capture_after(SnapshotRequest request);
  // After the client's transaction ended: do the captured OIDs still exist?
  void confirm_outcomes(std::string database, std::vector<PendingOutcome> pending);
  // Called by the proxy when it released a hold on its own timer, so the ledger says so.
  void mark_hold(const std::vector<TableResult>& tables, double hold_ms);
  // SIGHUP: the per-request settings (profile bounds, hash_excluded, naive_array_split,
  // dedup_window_s, enrichment SQL) for requests started afterwards. Conninfos, tables and pool
  // sizes stay as they were built.
  void reconfigure(const CaptureConfig& next);
  CaptureStats stats() const;
  void stop();

  // For the admin endpoint, blocking (call them off the relay loops).
  // Empty when the store accepts a write to both tables; else why not.
  std::string check_store() const;
  // The newest ledger rows as a JSON array.
  bool recent_events(int limit, std::string& json, std::string& error) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// `predrop migrate`: apply the embedded numbered SQL under an advisory lock, each file in a
// transaction; refuse a store whose recorded version is newer than this binary knows.
struct MigrateResult {
  bool ok = false;
  bool reached = false;  // connected to the store: a failure is the store's answer, not an outage
  int from_version = 0;
  int to_version = 0;
  std::string error;
};
MigrateResult migrate(const std::string& store_conninfo, const std::string& store_table = "predrop.schema_snapshots");

// A conninfo (key=value or URI) with every password replaced by "***", for logs and errors.
std::string mask_conninfo(const std::string& conninfo);

// A time-ordered UUID, as text (version 7: Unix milliseconds, a 12-bit count within the
// millisecond, then 62 random bits): the ids one process makes sort in the order it made them.
// The store's ids, and a quarantined DROP's hold id (quarantine/move_sql.hpp).
std::string new_uuid();

}  // namespace predrop::capture
