// What a statement destroys, as policy rules name it. Header-only: policy/ reads these names and
// decides by kind without linking the parser.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace predrop::parser {

// Each kind can be switched on or off by policy; names are the policy file's spelling, and a
// kind's index is its bit in a rule's kinds (policy/policy.hpp).
enum class DestroyKind : uint8_t {
  drop_table,
  drop_schema,        // DROP SCHEMA … CASCADE: every table in the schema
  drop_owned,         // DROP OWNED BY: every table the roles own
  alter_table,        // DROP COLUMN / ALTER COLUMN TYPE / RENAME COLUMN / RENAME TO
  truncate,
  drop_matview,
  drop_view,
  drop_foreign_table,
};
inline constexpr int kDestroyKindCount = 8;

// In DestroyKind's order.
inline constexpr std::array<std::string_view, kDestroyKindCount> kDestroyKindNames = {
    "drop_table", "drop_schema", "drop_owned", "alter_table",
    "truncate",   "drop_matview", "drop_view", "drop_foreign_table",
};

constexpr std::string_view to_string(DestroyKind kind) {
  const auto i = static_cast<std::size_t>(kind);
  return i < kDestroyKindNames.size() ? kDestroyKindNames[i] : std::string_view("unknown");
}

constexpr std::optional<DestroyKind> destroy_kind_from_string(std::string_view name) {
  for (std::size_t i = 0; i < kDestroyKindNames.size(); ++i)
    if (kDestroyKindNames[i] == name) return static_cast<DestroyKind>(i);
  return std::nullopt;
}

}  // namespace predrop::parser
