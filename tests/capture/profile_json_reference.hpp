// columns_profile_json as it was written through nlohmann's ordered_json, kept as the reference
// the direct writer in capture/snapshot.cpp must match byte for byte (snapshot_test.cpp and
// tests/fuzz/fuzz_pg_array.cpp compare the two).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "capture/snapshot.hpp"

namespace predrop::capture::test {

inline std::string columns_profile_json_reference(const std::vector<ColumnProfile>& columns) {
  nlohmann::ordered_json arr = nlohmann::ordered_json::array();
  for (const auto& c : columns) {
    nlohmann::ordered_json o;
    o["name"] = c.name;
    o["ordinal"] = c.ordinal;
    o["pg_type"] = c.pg_type;
    o["null_frac"] = c.null_frac ? nlohmann::ordered_json(*c.null_frac) : nlohmann::ordered_json(nullptr);
    o["n_distinct"] = c.n_distinct ? nlohmann::ordered_json(*c.n_distinct) : nlohmann::ordered_json(nullptr);
    o["most_common_vals"] = c.most_common_vals;
    o["histogram_sample"] = c.histogram_sample;
    arr.push_back(std::move(o));
  }
  return arr.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace predrop::capture::test
