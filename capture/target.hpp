// What a capture request asks for, as proxy/ and capture/ exchange it: why a snapshot is taken
// (its store reason) and how the catalog read finds a target's tables. Text appears only where
// these are written to the store or handed to the catalog statement, through to_string.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace predrop::capture {

// The store's `reason` of a snapshot predrop takes: a hold's before, or one of the afters.
enum class SnapshotReason : uint8_t {
  pre_drop,       // a hold's before (every destroying kind: DROP, ALTER, TRUNCATE …)
  post_create,    // a committed CREATE TABLE's after
  post_alter,     // a committed ALTER TABLE's after
  post_analyze,   // an after's statistics, once ANALYZE (or autovacuum) gave them
};

constexpr std::string_view to_string(SnapshotReason r) {
  switch (r) {
    case SnapshotReason::pre_drop: return "pre_drop";
    case SnapshotReason::post_create: return "post_create";
    case SnapshotReason::post_alter: return "post_alter";
    case SnapshotReason::post_analyze: return "post_analyze";
  }
  return "pre_drop";
}

constexpr std::optional<SnapshotReason> snapshot_reason_from_string(std::string_view s) {
  for (auto r : {SnapshotReason::pre_drop, SnapshotReason::post_create, SnapshotReason::post_alter,
                 SnapshotReason::post_analyze})
    if (to_string(r) == s) return r;
  return std::nullopt;
}

constexpr bool is_after(SnapshotReason r) { return r != SnapshotReason::pre_drop; }

// How the catalog read (capture/catalog_queries.cpp) finds a target's relations.
enum class TargetKind : uint8_t {
  relation,       // a hold's relation by name (search_path when unqualified), its partitions with it
  schema,         // DROP SCHEMA: every relation in the schema
  owned_by,       // DROP OWNED BY: every relation the roles own
  after_by_name,  // an after's relation by name: that relation alone, as its statement named it
  after_by_oid,   // an after's relation by OID, whatever it is called now
};

// The catalog statement's spelling ($1 of kTargetCtes, capture/catalog_queries.cpp).
constexpr std::string_view to_string(TargetKind k) {
  switch (k) {
    case TargetKind::relation: return "relation";
    case TargetKind::schema: return "schema";
    case TargetKind::owned_by: return "owned_by";
    case TargetKind::after_by_name: return "after_by_name";
    case TargetKind::after_by_oid: return "after_by_oid";
  }
  return "relation";
}

// What a later statement drops that a quarantined table may still use (issue 22); the yield
// statement (quarantine/move_sql.hpp) finds the tables that use it by this spelling.
enum class YieldKind : uint8_t { role, tablespace, access_method, operator_class, operator_family, extension };

constexpr std::string_view to_string(YieldKind k) {
  switch (k) {
    case YieldKind::role: return "role";
    case YieldKind::tablespace: return "tablespace";
    case YieldKind::access_method: return "access_method";
    case YieldKind::operator_class: return "operator_class";
    case YieldKind::operator_family: return "operator_family";
    case YieldKind::extension: return "extension";
  }
  return "role";
}

inline constexpr size_t kYieldKindCount = static_cast<size_t>(YieldKind::extension) + 1;

// A relation named by schema and name (the others name a schema, roles or an OID).
constexpr bool names_relation(TargetKind k) { return k == TargetKind::relation || k == TargetKind::after_by_name; }

}  // namespace predrop::capture
