// What became of one intercepted target: the value of drop_events.outcome, the label of
// predrop_snapshots_total and what the hold decides on. One enum for capture/ and proxy/, so
// no outcome travels as text and is compared back.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace predrop::capture {

enum class SnapshotOutcome : uint8_t {
  written,        // its snapshot row is in the store
  table_missing,  // nothing by that name existed: nothing to keep
  timeout,        // the deadline passed first
  capture_error,  // the catalog read failed (or the service stopped)
  store_error,    // the store did not take the write
  policy_skip,    // a rule said skip: ledger row only
  disabled,       // snapshots off or no capture configured: ledger row only
  deduplicated,   // the same shape was written within dedup_window_s
  unresolved,     // may destroy what no parser can see (DO, EXECUTE, CALL): ledger row only
  unparsed,       // a statement the parser rejects whose targets its tokens do not show: ledger row only
  // A quarantine rule covered it, but its substitute could not keep the table and ran the statement
  // for real (after the snapshot): ledger row only, its error says why.
  not_quarantined,
  // A quarantined table purged for good so that a later statement (DROP ROLE of its owner, DROP
  // ACCESS METHOD …) answers as direct: ledger row only, its error says to what it yielded.
  yielded,
};
inline constexpr size_t kSnapshotOutcomeCount = static_cast<size_t>(SnapshotOutcome::yielded) + 1;

// The text the ledger stores (and the metric label): never changes for an existing value.
const char* to_string(SnapshotOutcome o);

// Whether the statement may go on: its targets are kept, or there was nothing to keep.
constexpr bool is_kept(SnapshotOutcome o) {
  return o == SnapshotOutcome::written || o == SnapshotOutcome::table_missing || o == SnapshotOutcome::deduplicated;
}

// A DROP a hold snapshotted whose fate is known only when its transaction ends: checked then, by
// OID, in the catalog (dropped, not dropped, quarantined).
struct PendingOutcome {
  uint32_t oid = 0;
  std::string snapshot_id;
  std::string event_id;
  // The statement was a quarantine's: a table found in this schema was quarantined, and its store
  // row (predrop.quarantine) is written from its comment.
  std::string quarantine_schema{};
  int64_t retention_s = 0;
  std::string application_name{}, client_addr{};
  // The hold that wrote it, written with the outcome (no statement of its own): onto the ledger
  // row, and onto the snapshot row when the hold wrote it (not one it was deduplicated against).
  std::optional<double> hold_ms{};
  // snapshot_id is the snapshot this hold wrote; else the one it was deduplicated against, which an
  // earlier DROP wrote: that one's outcome is not undone by this DROP's not_dropped.
  bool wrote_snapshot = false;
  // The server answered the statement with an error: it dropped nothing (not_dropped), and a
  // quarantine the check finds the table in is another DROP's.
  bool statement_failed = false;
  // The hold whose quarantine move this DROP was (QuarantineMove::hold_id): a table found under a
  // comment that names another hold was moved by another DROP.
  std::string hold_id{};
};

}  // namespace predrop::capture
