// The rules: which destructive statements are held for a snapshot, and what happens if it fails.
#include <array>

#include "policy/glob.hpp"
#include "policy/policy.hpp"

namespace predrop::policy {

namespace {
// Must follow parser::DestroyKind's order: the index is the bit in Rule::kinds.
constexpr std::array<std::string_view, kKindCount> kKindNames = {
    "drop_table", "drop_schema", "drop_owned", "alter_table",
    "truncate",   "drop_matview", "drop_view", "drop_foreign_table",
};
}  // namespace

std::string_view kind_name(int kind) {
  if (kind < 0 || kind >= kKindCount) return {};
  return kKindNames[static_cast<std::size_t>(kind)];
}

std::optional<int> kind_from_name(std::string_view name) {
  for (int i = 0; i < kKindCount; ++i)
    if (kKindNames[static_cast<std::size_t>(i)] == name) return i;
  return std::nullopt;
}

Decision Config::decide(std::string_view database, std::string_view schema, std::string_view table,
                        int kind) const {
  const bool kind_known = kind >= 0 && kind < 32;
  for (std::size_t i = 0; i < rules.size(); ++i) {
    const Rule& r = rules[i];
    if (!kind_known || (r.kinds & (1u << kind)) == 0) continue;
    if (!detail::glob_match(r.database, database) || !detail::glob_match(r.schema, schema) ||
        !detail::glob_match(r.table, table))
      continue;
    return {r.action, r.on_failure, static_cast<int>(i)};
  }
  return {default_rule.action, default_rule.on_failure, -1};
}

bool Config::baseline_excludes(std::string_view schema, std::string_view table) const {
  for (const auto& item : baseline_exclude) {
    auto dot = item.find('.');
    if (dot == std::string::npos) continue;  // the loader refuses these
    if (detail::glob_match(std::string_view(item).substr(0, dot), schema) &&
        detail::glob_match(std::string_view(item).substr(dot + 1), table))
      return true;
  }
  return false;
}

}  // namespace predrop::policy
