// The catalog reads of a capture, batched: one query resolves every target (search_path,
// DROP SCHEMA, DROP OWNED, partitions) and returns columns, reltuples, OID and relkind, each
// column with its pg_stats row (bounded server-side) beside it; one optional enrichment query.
// Nothing here reads a table's data or takes a lock on it: only pg_class, pg_attribute,
// pg_namespace, pg_inherits, pg_roles and the pg_stats view are read.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "capture/capture.hpp"
#include "capture/pg_async.hpp"
#include "capture/snapshot.hpp"

namespace predrop::capture {

// Best-effort values from the configured enrichment queries.
struct Enrichment {
  std::optional<std::string> resource_identity;
  std::optional<int> version;
  std::optional<std::string> parser_version, normalization_version, layout_profile, header_quality;
  std::optional<bool> is_truncated;
};

struct CapturedTable {
  Snapshot snap;
  char relkind = 'r';
  std::vector<int> target_indexes;  // which request targets reached it (0-based)
  Enrichment enrich;
};

struct BatchQuery {
  const char* name;  // prepared statement name; nullptr: run unprepared
  std::string sql;
  Params params;
  Plan plan = Plan::kept;
};


struct CatalogResult {
  std::vector<CapturedTable> tables;  // one per OID, in first-target order
  std::vector<bool> target_found;     // per target: reached at least one capturable relation
  std::string server;                 // capture_query: the server read (start time/port); else empty
};
CatalogResult parse_catalog(const PgResult& r, size_t target_count);

// A hold's, an after's or a baseline's capture in one statement, its targets in order (unqualified
// names resolved through search_path as the server does: "$user" is the session user, pg_catalog
// first unless listed, temp schemas ignored): the catalog read with each
// column's pg_stats row beside it, arrays sliced to max_values and (proper mode) values clipped to
// max_value_chars on the server; the columns of tables above max_columns get no profile.
BatchQuery capture_query(const SnapshotRequest& request, const ProfileBounds& bounds, bool naive);
CatalogResult parse_capture(const PgResult& r, size_t target_count, const ProfileBounds& bounds, bool naive);

// Marks tables above max_columns (profile_skipped).
void mark_profile_skipped(std::vector<CapturedTable>& tables, const ProfileBounds& bounds);

// The user's query (with $1 schema, $2 table) run for every table in one round trip, as a
// LATERAL join over the list. Empty user SQL gives nullopt.
std::optional<BatchQuery> enrich_query(const std::string& user_sql, const std::vector<CapturedTable>& tables);
void apply_enrichment(const PgResult& r, std::vector<CapturedTable>& tables);

}  // namespace predrop::capture
