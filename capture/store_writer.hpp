// The store's statements. A request's snapshots, its de-duplication check and its ledger rows
// go in ONE statement (data-modifying CTEs): one round trip, atomic, no snapshot without its
// ledger row. Ids are generated here, so results map back to rows without guessing.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "capture/capture.hpp"
#include "capture/catalog_queries.hpp"
#include "capture/pg_async.hpp"

namespace predrop::capture {

// SQL texts with the (already quoted) snapshot and ledger table names filled in.
struct StoreSql {
  std::string write;     // snapshots + dedup + ledger
  std::string write_befores;  // the same for a write of befores only (no pairing)
  std::string events;    // ledger rows only
  std::string hold;      // hold_ms onto snapshot and ledger rows
  std::string hold_events;  // hold_ms onto ledger rows only: no lock on the snapshot table, which may be held
  std::string outcome;   // drop_outcome onto snapshot and ledger rows
  std::string copy_after;   // afters absorbed by later holds: each hold's before, copied as its after
  std::string quarantine_record;   // the store rows of quarantined tables (quarantine/store_rows.hpp)
  std::string outcome_quarantined;   // outcome, for checks that found tables quarantined
};
StoreSql build_store_sql(const std::string& quoted_store_table, const std::string& quoted_events_table);

// The channel every written snapshot row is announced on.
inline constexpr const char* kSnapshotChannel = "predrop_snapshots";

// What every statement that writes snapshot rows shares (a hold's write, an absorbed after's copy,
// a baseline row: evidence/baseline.cpp), filled into its text: @SNAPSHOT_COLUMNS@ becomes the
// columns every snapshot row is written with, in the order its SELECT gives them; @PAYLOAD@ the
// announcement of one written row, read from `row`, whose RETURNING has id, database_name,
// schema_name, table_name, reason, schema_hash, pair_of and captured_at; @NOTIFY@ its
// pg_notify(kSnapshotChannel, …). The payload is a stable format (README, "The snapshot event
// stream"). The capture service's writes return their payloads, for capture/announcer.hpp to send once
// they have committed; a baseline (evidence/baseline.cpp) notifies in the transaction that writes it.
void expand_snapshot_sql(std::string& sql, std::string_view row);

// One row of a write: a captured table (captured != nullptr, no outcome yet) or a ledger-only row.
struct WriteRow {
  std::string snapshot_id;  // generated; used only when a snapshot is written
  std::string event_id;     // generated
  std::string schema, table;
  std::optional<uint32_t> oid;
  // None: captured, and the write itself decides written or deduplicated.
  std::optional<SnapshotOutcome> outcome;
  std::string error;
  const CapturedTable* captured = nullptr;
  std::string pair_hint;    // an after: the before its target named (TargetSpec::pair_hint)
  // An after: a hold's before of its table written while it ran (SnapshotRequest::befores_meanwhile);
  // it is dated just before that snapshot.
  std::string dated_before;
};

// The rows of one request and what they share. profile_of: a post_analyze's after (its pair is
// the after's); empty otherwise.
struct WriteGroup {
  const std::vector<WriteRow>* rows;
  const StatementContext* ctx;
  SnapshotReason reason = SnapshotReason::pre_drop;
  double capture_ms = 0;
  std::string profile_of;
  // The server its tables were read on (CatalogResult::server); empty: unknown.
  std::string server;
};
// One write for the rows of every group, in order (the result has one row per row, by ord).
Params write_params(const std::vector<WriteGroup>& groups, const CaptureConfig& cfg);
Params events_params(const std::vector<WriteRow>& rows, const StatementContext& ctx, const CaptureConfig& cfg,
                     SnapshotReason reason, std::optional<double> hold_ms, double capture_ms);
// An after absorbed by a hold's before: written as a copy of that before (kCopyAfterSql).
struct AfterCopy {
  std::string before_id;
  SnapshotReason reason = SnapshotReason::post_create;   // post_create | post_alter
  std::string pair_hint;
  StatementContext ctx;    // the after's own statement and session
};
Params copy_after_params(const std::vector<AfterCopy>& copies, const CaptureConfig& cfg);
Params hold_params(const std::vector<std::string>& snapshot_ids, const std::vector<std::string>& event_ids, double hold_ms);
// outcomes[i] is "dropped" or "not_dropped" for pending[i]; its hold_ms goes onto its rows too.
// quarantine_ids[i]: the quarantine that holds pending[i] (outcome "quarantined"), else empty.
Params outcome_params(const std::vector<PendingOutcome>& pending, const std::vector<std::string>& outcomes,
                      const std::vector<std::string>& quarantine_ids);

}  // namespace predrop::capture
