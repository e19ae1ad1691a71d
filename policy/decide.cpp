// The rules: which destructive statements are held for a snapshot, and what happens if it fails.
#include "policy/glob.hpp"
#include "policy/policy.hpp"

namespace predrop::policy {

std::string_view kind_name(int kind) {
  if (kind < 0 || kind >= kKindCount) return {};
  return parser::to_string(static_cast<DestroyKind>(kind));
}

std::optional<int> kind_from_name(std::string_view name) {
  if (auto kind = parser::destroy_kind_from_string(name)) return static_cast<int>(*kind);
  return std::nullopt;
}

namespace {

// An unknown (empty) value never satisfies a condition: "user: *" means a known user.
bool glob_condition(const std::string& pattern, std::string_view value) {
  return pattern.empty() || (!value.empty() && detail::glob_match(pattern, value));
}

bool who_matches(const Rule& r, const Who& who) {
  if (!glob_condition(r.user, who.user) || !glob_condition(r.application_name, who.application_name)) return false;
  return !r.client_net || (!who.client_addr.empty() && r.client_net->contains(who.client_addr));
}

// A quarantine keeps tables whole; what other kinds destroy (rows, columns, views) can only be snapshotted.
Action action_for_kind(Action action, DestroyKind kind) {
  if (action != Action::quarantine) return action;
  return kind == DestroyKind::drop_table || kind == DestroyKind::drop_schema ? Action::quarantine : Action::snapshot;
}

}  // namespace

bool Config::quarantines_in(std::string_view database) const {
  if (default_rule.action == Action::quarantine) return true;
  for (const auto& r : rules)
    if (r.action == Action::quarantine && detail::glob_match(r.database, database)) return true;
  return false;
}

Decision Config::decide(std::string_view database, std::string_view schema, std::string_view table,
                        DestroyKind kind) const {
  return decide(database, schema, table, kind, Who{});
}

Decision Config::decide(std::string_view database, std::string_view schema, std::string_view table, DestroyKind kind,
                        const Who& who) const {
  const unsigned kind_bit = 1u << static_cast<unsigned>(kind);
  for (std::size_t i = 0; i < rules.size(); ++i) {
    const Rule& r = rules[i];
    if ((r.kinds & kind_bit) == 0) continue;
    if (!detail::glob_match(r.database, database) || !detail::glob_match(r.schema, schema) ||
        !detail::glob_match(r.table, table) || !who_matches(r, who))
      continue;
    return {action_for_kind(r.action, kind), r.on_failure, static_cast<int>(i)};
  }
  return {action_for_kind(default_rule.action, kind), default_rule.on_failure, -1};
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
