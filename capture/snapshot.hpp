// Pure functions and types over snapshots: no database, no I/O.
#pragma once

#include <cstdint>
#include <optional>
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

}  // namespace predrop::capture
