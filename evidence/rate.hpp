// How often formats change (spec 023, US-003: "know how often formats actually change and in what
// way, so that the decision to build … rests on a measured rate"), read off the pairs a drift
// report classifies. Pure: no database; the week boundaries come from the caller's today.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "evidence/drift.hpp"

namespace predrop::evidence {

// A pair that shows a table recreated or altered: every before/after pair (a DROP and its CREATE,
// an ALTER), and consecutive snapshots of a table (same_table) where the earlier one was taken
// before a DROP, the relation changed (another table OID), or the shape changed. Version pairs
// (a resource identity under a new table name) are not counted: their tables are other tables.
bool shows_recreate_or_alter(const PairVerdict& p);

// What one pair changed, by kind; a rename is not also counted as an added and a removed column.
struct ShapeChange {
  bool changed = false;   // the shape (schema_hash) or a column's type changed
  bool added = false, removed = false, renamed = false, type_changed = false;
};
ShapeChange shape_change(const DriftVerdict& v);

// The first day (a Monday) of the ISO week holding an ISO 8601 date or timestamp; "" when the
// text does not start with a valid YYYY-MM-DD.
std::string week_of(const std::string& iso);

// The rate over a window ending `today` (YYYY-MM-DD, UTC), in distinct tables (schema.table):
//   {"window_days", "pairs_counted",
//    "overall": {tables_seen, tables_changed_shape, added, removed, renamed, type_changed, share_changed},
//    "by_schema": {schema: the same},
//    "weekly": [{"week": Monday, the same counts}, …] oldest first, every week of the window, empty ones too}
// A table counts in a week when a pair of it ends (its later snapshot was captured) in that week.
nlohmann::json change_rate_json(const std::vector<PairVerdict>& pairs, int days, const std::string& today);

}  // namespace predrop::evidence
