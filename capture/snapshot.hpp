// Pure functions and types over snapshots: no database, no I/O.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <string>
#include <string_view>
#include <vector>

namespace predrop::capture {

struct ProfileBounds {
  int max_values = 20;       // entries kept per list
  int max_value_chars = 120; // characters (code points) per value
  int max_columns = 300;     // above this no profile is read at all
};

struct ColumnProfile {
  std::string name;
  int ordinal = 0;                 // attnum, gaps kept
  std::string pg_type;             // format_type(atttypid, atttypmod)
  std::optional<double> null_frac;
  std::optional<double> n_distinct;
  std::vector<std::string> most_common_vals;
  std::vector<std::string> histogram_sample;
};

struct Snapshot {
  std::string id;
  std::string schema_name;
  std::string table_name;
  uint32_t table_oid = 0;
  std::vector<ColumnProfile> columns;
  std::optional<int64_t> row_count_estimate;
  std::string schema_hash;
  bool stats_available = false;
  bool profile_skipped = false;
};

// SHA-1 (40 lowercase hex) of the code-point-sorted column names joined by '|', excluded names removed.
std::string schema_hash(std::vector<std::string> names, const std::vector<std::string>& excluded);

// PostgreSQL array text ({a,"b,c",NULL}) to values, bounded. naive=true reproduces the
// reference application's comma split, for stores shared with it.
std::vector<std::string> parse_pg_array(std::string_view text, const ProfileBounds& bounds, bool naive = false);

// Clip to at most n Unicode code points without splitting a UTF-8 sequence.
std::string clip_chars(std::string_view s, int n);

// The reference's columns_profile: a JSON array, one object per column with the seven keys
// name, ordinal, pg_type, null_frac, n_distinct, most_common_vals, histogram_sample;
// non-ASCII left unescaped (invalid UTF-8 is replaced, never thrown on).
std::string columns_profile_json(const std::vector<ColumnProfile>& columns);

// PostgreSQL array input text for a list of values ({"a","b\"c",NULL}); nullopt -> NULL.
std::string pg_array_literal(const std::vector<std::optional<std::string>>& values);

// Every `from` in `s` becomes `to`: how the SQL templates fill their placeholders
// (catalog_queries.cpp, store_writer.cpp, migrate.cpp, evidence/baseline.cpp).
void replace_all(std::string& s, const std::string& from, const std::string& to);

// "schema.table" / "\"Schema\".\"t\"" / "table" -> (schema, table); no dot -> default_schema.
std::pair<std::string, std::string> split_qualified(std::string_view name, std::string_view default_schema = "public");

}  // namespace predrop::capture
