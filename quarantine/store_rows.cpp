#include "quarantine/store_rows.hpp"

#include "quarantine/move_sql.hpp"

namespace predrop::quarantine {

namespace {

// The store rows of quarantined tables from their comments. `rows` is the FROM clause: per row db
// (the database), d (the comment), qtable (the quarantine table) and bytes, and with per_row also
// qs (the quarantine schema), sid, eid, retention, app and addr, which are otherwise $3, $6, $7,
// $8, $9 and $10 for every row. `state` and `reason` are SQL expressions; `then` is what follows
// the SELECT.
std::string record_rows_sql(std::string_view store_table, std::string_view rows, std::string_view state,
                            std::string_view reason, std::string_view then, bool per_row = false) {
  auto each = [per_row](const char* column, const char* param) { return std::string(per_row ? column : param); };
  return "INSERT INTO " + quote_qualified_ident(store_table) +
         " AS q (id, database_name, schema_name, table_name, table_oid, quarantine_schema, quarantine_table, dropped_at,"
         " expires_at, bytes, snapshot_id, event_id, dropped_by, application_name, client_addr, state, state_at,"
         " state_reason, detail)"
         " SELECT (d->>'id')::uuid, a.db, d->>'schema', d->>'table', (d->>'oid')::bigint, " + each("a.qs", "$3") +
         ", a.qtable, (d->>'dropped_at')::timestamptz, (d->>'dropped_at')::timestamptz + " +
         each("a.retention", "$8::bigint") + " * interval '1 second', a.bytes, " + each("a.sid", "$6::uuid") + ", " +
         each("a.eid", "$7::uuid") + ", d->>'dropped_by', " + each("a.app", "$9") + ", " + each("a.addr", "$10") + ", " +
         std::string(state) + ", now(), " + std::string(reason) + ", d"
         // A partition's comment only points at its tree's (the tree is one quarantine, one row).
         " FROM " + std::string(rows) + " WHERE d ? 'predrop_quarantine' " + std::string(then);
}

constexpr const char* kOneRow = "(SELECT $1::text AS db, $2::jsonb AS d, $4::text AS qtable, $5::bigint AS bytes) a";
// A row already there takes the new state only while it is held: a purged or restored one stays.
constexpr const char* kSetWhereHeld =
    "ON CONFLICT (id) DO UPDATE SET state = EXCLUDED.state, state_at = now(), state_reason = EXCLUDED.state_reason "
    "WHERE q.state = 'held'";

}  // namespace

std::string record_each_sql(std::string_view store_table, std::string_view snapshots_table,
                            std::string_view events_table) {
  const std::string quarantine = quote_qualified_ident(store_table);
  const std::string snapshots(snapshots_table), events(events_table);
  // A row already there is a DROP's that came before (a later one's move is the one that stood:
  // event ids sort in the order made, capture/store_writer.hpp), or one the purger wrote without
  // the DROP's ids: it becomes this DROP's. The DROP it named did not drop the table after all:
  // its ledger row, and the snapshot that row names, say not_dropped.
  return "WITH old AS (SELECT q.id, q.event_id FROM " + quarantine +
         " q WHERE q.id IN (SELECT (d->>'id')::uuid FROM unnest($2::jsonb[]) AS d)), ins AS (" +
         record_rows_sql(store_table,
                         "unnest($1::text[], $2::jsonb[], $3::text[], $4::text[], $5::bigint[], $6::uuid[], $7::uuid[],"
                         " $8::bigint[], $9::text[], $10::text[])"
                         " AS a(db, d, qs, qtable, bytes, sid, eid, retention, app, addr)",
                         "'held'", "NULL",
                         "ON CONFLICT (id) DO UPDATE SET snapshot_id = EXCLUDED.snapshot_id, event_id = EXCLUDED.event_id,"
                         " application_name = EXCLUDED.application_name, client_addr = EXCLUDED.client_addr,"
                         " bytes = coalesce(EXCLUDED.bytes, q.bytes), expires_at = EXCLUDED.expires_at"
                         " WHERE q.state = 'held' AND EXCLUDED.event_id IS NOT NULL"
                         " AND (q.event_id IS NULL OR q.event_id < EXCLUDED.event_id) RETURNING q.id, q.event_id",
                         true) +
         "), lost AS (UPDATE " + events + " e SET drop_outcome = 'not_dropped', outcome_at = now(), quarantine_id = NULL"
         " FROM old JOIN ins ON ins.id = old.id WHERE e.id = old.event_id AND old.event_id <> ins.event_id"
         " RETURNING e.snapshot_id, old.id)"
         // Only where the snapshot names this quarantine: a deduplicated DROP's names one an earlier
         // DROP wrote, whose own outcome stands.
         " UPDATE " + snapshots + " s SET drop_outcome = 'not_dropped', outcome_at = now(), extra = s.extra - 'quarantine_id'"
         " FROM lost WHERE s.id = lost.snapshot_id AND s.extra->>'quarantine_id' = lost.id::text";
}

std::string record_many_sql(std::string_view store_table) {
  return record_rows_sql(store_table, "unnest($1::text[], $2::jsonb[], $4::text[], $5::bigint[]) AS a(db, d, qtable, bytes)",
                         "'held'", "NULL", "ON CONFLICT (id) DO NOTHING");
}

std::string mark_many_sql(std::string_view store_table) {
  return record_rows_sql(store_table,
                         "unnest($1::text[], $2::jsonb[], $4::text[], $5::bigint[], $12::text[]) AS a(db, d, qtable, bytes, reason)",
                         "$11::text", "a.reason", kSetWhereHeld);
}

std::string yielded_sql(std::string_view store_table) {
  return record_rows_sql(store_table, kOneRow, "'purged'", "$11", kSetWhereHeld);
}

}  // namespace predrop::quarantine
