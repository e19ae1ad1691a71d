#include "evidence/rate.hpp"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <set>

namespace predrop::evidence {

namespace {

// Days since 1970-01-01 of a proleptic Gregorian date, and back (H. Hinnant's civil algorithms).
int64_t days_from_civil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

std::string civil_from_days(int64_t z) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const unsigned doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int64_t y = static_cast<int64_t>(yoe) + era * 400;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  const unsigned d = doy - (153 * mp + 2) / 5 + 1;
  const unsigned m = mp < 10 ? mp + 3 : mp - 9;
  char buf[48];   // room for any int64 year: the compiler cannot bound it
  std::snprintf(buf, sizeof buf, "%04lld-%02u-%02u", static_cast<long long>(y + (m <= 2)), m, d);
  return buf;
}

std::optional<int64_t> day_number(const std::string& iso) {
  if (iso.size() < 10 || iso[4] != '-' || iso[7] != '-') return std::nullopt;
  for (int i : {0, 1, 2, 3, 5, 6, 8, 9})
    if (!std::isdigit(static_cast<unsigned char>(iso[i]))) return std::nullopt;
  int y = std::stoi(iso.substr(0, 4)), m = std::stoi(iso.substr(5, 2)), d = std::stoi(iso.substr(8, 2));
  static constexpr int kDays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (m < 1 || m > 12 || d < 1 || d > kDays[m - 1]) return std::nullopt;
  bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  if (m == 2 && d == 29 && !leap) return std::nullopt;
  return days_from_civil(y, static_cast<unsigned>(m), static_cast<unsigned>(d));
}

// The Monday on or before a day (1970-01-01 was a Thursday).
int64_t monday_of(int64_t day) {
  int64_t weekday = ((day + 3) % 7 + 7) % 7;   // 0 = Monday
  return day - weekday;
}

// Distinct tables by what happened to them.
struct Tally {
  std::set<std::string> seen, changed, added, removed, renamed, type_changed;

  void count(const std::string& table, const ShapeChange& c) {
    seen.insert(table);
    if (!c.changed) return;
    changed.insert(table);
    if (c.added) added.insert(table);
    if (c.removed) removed.insert(table);
    if (c.renamed) renamed.insert(table);
    if (c.type_changed) type_changed.insert(table);
  }

  nlohmann::json to_json() const {
    return {{"tables_seen", seen.size()},
            {"tables_changed_shape", changed.size()},
            {"added", added.size()},
            {"removed", removed.size()},
            {"renamed", renamed.size()},
            {"type_changed", type_changed.size()},
            {"share_changed", seen.empty() ? 0.0 : static_cast<double>(changed.size()) / static_cast<double>(seen.size())}};
  }
};

}  // namespace

bool shows_recreate_or_alter(const PairVerdict& p) {
  if (!p.evaluated || !p.before || !p.after) return false;
  if (p.kind == "before_after") return true;
  if (p.kind != "same_table") return false;
  const auto& d = p.verdict.diff;
  bool other_relation = p.before->table_oid && p.after->table_oid && *p.before->table_oid != *p.after->table_oid;
  return p.before->reason == "pre_drop" || other_relation || d.schema_changed || !d.type_changed.empty();
}

ShapeChange shape_change(const DriftVerdict& v) {
  const auto& d = v.diff;
  ShapeChange c;
  std::set<std::string> from, to;
  for (const auto& r : d.renamed_candidates) {
    from.insert(r.from);
    to.insert(r.to);
  }
  c.renamed = !d.renamed_candidates.empty();
  for (const auto& a : d.added) c.added = c.added || !to.count(a);
  for (const auto& r : d.removed) c.removed = c.removed || !from.count(r);
  c.type_changed = !d.type_changed.empty();
  c.changed = d.schema_changed || c.added || c.removed || c.renamed || c.type_changed;
  return c;
}

std::string week_of(const std::string& iso) {
  auto day = day_number(iso);
  return day ? civil_from_days(monday_of(*day)) : "";
}

nlohmann::json change_rate_json(const std::vector<PairVerdict>& pairs, int days, const std::string& today) {
  Tally overall;
  std::map<std::string, Tally> by_schema;
  std::map<int64_t, Tally> by_week;
  size_t counted = 0;
  for (const auto& p : pairs) {
    if (!shows_recreate_or_alter(p)) continue;
    ++counted;
    std::string table = p.after->schema_name + "." + p.after->table_name;
    ShapeChange c = shape_change(p.verdict);
    overall.count(table, c);
    by_schema[p.after->schema_name].count(table, c);
    if (auto day = day_number(p.after->captured_at)) by_week[monday_of(*day)].count(table, c);
  }
  // Every week of the window, the empty ones too, so that a series reads as time; and any week a
  // pair ended in outside it (the server's clock and this one's may disagree by a day).
  std::optional<int64_t> first, last;
  if (auto t = day_number(today)) {
    last = monday_of(*t);
    first = monday_of(*t - days);
  }
  if (!by_week.empty()) {
    first = first ? std::min(*first, by_week.begin()->first) : by_week.begin()->first;
    last = last ? std::max(*last, by_week.rbegin()->first) : by_week.rbegin()->first;
  }
  nlohmann::json weekly = nlohmann::json::array();
  if (first && last)
    for (int64_t w = *first; w <= *last; w += 7) {
      nlohmann::json row = {{"week", civil_from_days(w)}};
      row.update(by_week[w].to_json());
      weekly.push_back(std::move(row));
    }
  nlohmann::json schemas = nlohmann::json::object();
  for (const auto& [schema, tally] : by_schema) schemas[schema] = tally.to_json();
  return {{"window_days", days}, {"pairs_counted", counted}, {"overall", overall.to_json()}, {"by_schema", schemas},
          {"weekly", weekly}};
}

}  // namespace predrop::evidence
