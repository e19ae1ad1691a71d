// The age of every table's data (plan 026, phase A: "surface the collected-at age of the tables
// behind an answer"): when the version a table has now appeared, read from the store alone.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "evidence/store_reader.hpp"

namespace predrop::evidence {

struct TableAge {
  std::string database, schema, table;
  // When its current version appeared: the newest post_create, else the first time a baseline
  // saw it, else its first snapshot; at_least unless a post_create says so exactly.
  std::string since;          // ISO 8601, UTC
  std::string since_from;     // post_create | baseline | first_snapshot
  bool at_least = false;
  int64_t age_s = 0;
  int64_t versions_in_window = 0;   // recreates (post_create) within the window
  int64_t shapes_in_window = 0;     // distinct schema_hash among its snapshots within the window
  std::string last_seen;      // its newest snapshot, ISO 8601
};

struct AgesQuery {
  std::optional<std::string> database, schema;
  int window_days = 30;
};

// Each table the store knows and does not know gone (its newest snapshot is not the before of a
// DROP that went through: drop_outcome dropped or quarantined), oldest data first. One statement,
// aggregated by the server.
std::vector<TableAge> table_ages(PgSession& store, const std::string& store_table, const AgesQuery& q);

// The same tables' ages as a histogram per database and schema: cumulative counts at each bound
// (seconds, ascending), as Prometheus buckets are.
struct AgeHistogram {
  std::string database, schema;
  std::vector<int64_t> cumulative;
  int64_t count = 0, sum_s = 0;
};
std::vector<AgeHistogram> age_histograms(PgSession& store, const std::string& store_table,
                                         const std::vector<int64_t>& bounds);

// The histograms one serve of a fleet computes and the others read (migrations/0007_table_ages.sql):
// the row in predrop.table_ages when it was computed within fresh_for with these bounds; else
// computed here and written there by the serve that takes the advisory lock (kAgesLockClass,
// hashtext(store_table)), while the others keep to the row as it is. Computed and not shared
// where the store has no such table (a store not migrated to version 7), the role may not read and
// write it, or the write is refused.
inline constexpr int kAgesLockClass = 1885626727;  // "pdag"
struct SharedAges {
  std::vector<AgeHistogram> histograms;
  bool computed = false;     // by this call (else read from the row another serve wrote)
  double computed_at = 0;    // Unix seconds, the server's clock
};
SharedAges shared_age_histograms(PgSession& store, const std::string& store_table, const std::vector<int64_t>& bounds,
                                 int64_t fresh_for_ms);

}  // namespace predrop::evidence
