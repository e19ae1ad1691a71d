// Builders for snapshots in unit tests: columns with values as MCVs, default provenance as in
// the reference application's cascade cases (phase4-v1 / simple_tabular on both sides).
#pragma once

#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "evidence/diff.hpp"

namespace predrop::evidence_test {

using predrop::capture::ColumnProfile;
using predrop::evidence::StoredSnapshot;

inline ColumnProfile col(std::string name, std::string type, std::vector<std::string> values,
                         std::optional<double> null_frac = 0.0) {
  ColumnProfile c;
  c.name = std::move(name);
  c.pg_type = std::move(type);
  c.null_frac = null_frac;
  c.most_common_vals = std::move(values);
  return c;
}

inline std::vector<std::string> provinces() { return {"Buenos Aires", "Córdoba", "Santa Fe", "Mendoza", "Salta"}; }
inline std::vector<std::string> years() { return {"2019", "2020", "2021", "2022"}; }
inline std::vector<std::string> reversed(std::vector<std::string> v) {
  std::reverse(v.begin(), v.end());
  return v;
}

inline StoredSnapshot snap(std::vector<ColumnProfile> cols, std::string parser = "phase4-v1") {
  StoredSnapshot s;
  s.schema_name = "raw";
  s.table_name = "t";
  int ord = 1;
  for (auto& c : cols) c.ordinal = ord++;
  s.columns = std::move(cols);
  s.column_count = static_cast<int>(s.columns.size());
  s.provenance.parser_version = parser.empty() ? std::nullopt : std::optional<std::string>(parser);
  s.provenance.normalization_version = "n:v3";
  s.provenance.layout_profile = "simple_tabular";
  s.provenance.header_quality = "good";
  s.provenance.is_truncated = false;
  return s;
}

}  // namespace predrop::evidence_test
