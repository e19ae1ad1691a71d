// The quarantine's commands (issue 16): `predrop undrop`, `predrop quarantine list | purge`, and
// the operations the purger inside serve shares with them. The quarantined table's comment is the
// truth (capture/quarantine_sql.hpp); the store's predrop.quarantine rows follow it.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "capture/quarantine_sql.hpp"
#include "evidence/store_reader.hpp"
#include "policy/policy.hpp"

namespace predrop::cli {

// The quarantine.* keys of a config, in the units the commands use. Their defaults are the
// policy's (policy/policy.hpp), never written here.
struct QuarantineSettings {
  std::string schema;
  int64_t retention_s = 0;
  uint64_t max_bytes = 0, max_tables = 0;
  int purge_interval_s = 0, lock_timeout_ms = 0;
};

inline QuarantineSettings quarantine_settings(const policy::Config& c) {
  QuarantineSettings s;
  s.schema = c.quarantine_schema;
  s.retention_s = static_cast<int64_t>(c.quarantine_retention_s);
  s.max_bytes = static_cast<uint64_t>(c.quarantine_max_bytes);
  s.max_tables = static_cast<uint64_t>(c.quarantine_max_tables);
  s.purge_interval_s = static_cast<int>(c.quarantine_purge_interval_s);
  s.lock_timeout_ms = static_cast<int>(c.quarantine_lock_timeout_ms);
  return s;
}

using capture::kQuarantineStoreTable;

// One quarantined table of one database, as quarantine_catalog_sql lists it.
struct HeldTable {
  std::string database, quarantine_table;
  int64_t oid = 0;
  int64_t bytes = 0;
  int64_t dropped_at = 0;  // unix seconds, from detail.dropped_at
  nlohmann::json detail;
  std::string id() const { return detail.value("id", ""); }
};

// Oldest drop first. A missing quarantine schema is an empty list.
// Every database a quarantine may be in: those that allow connections, templates aside, by name;
// read through the capture conninfo (its own database, else postgres).
std::vector<std::string> connectable_databases(const std::string& capture_conninfo, const std::string& application_name);

std::vector<HeldTable> list_held(evidence::PgSession& db, const std::string& database, const std::string& schema);

enum class PurgeOutcome { dropped, lock_timeout, gone };
// DROP TABLE of one held table in a transaction of its own under SET LOCAL lock_timeout, so a
// session holding a lock on it makes this give up (lock_timeout) rather than queue the others.
// Throws on any other error.
PurgeOutcome purge_held(evidence::PgSession& db, const std::string& schema, const HeldTable& t, int lock_timeout_ms);

// The store's rows: inserts a 'held' row for each listed table it lacks; marks one row.
void store_record_held(evidence::PgSession& store, const std::string& schema, const std::vector<HeldTable>& held,
                       int64_t retention_s);
void store_mark(evidence::PgSession& store, const HeldTable& t, const std::string& schema, const std::string& state,
                const std::string& reason);

// "7d", "36h", "90m", "30s" or integer seconds; -1 when it is none of those.
int64_t parse_duration_s(const std::string& text);
// detail.dropped_at ("YYYY-MM-DDTHH:MM:SSZ") as unix seconds; 0 when unreadable.
int64_t parse_utc_seconds(const std::string& iso);

void register_quarantine_commands(CLI::App& app);

// `quarantine list --format json` and `undrop --format json` as functions (the console's SHOW
// QUARANTINE and UNDROP). They fail by throwing CLI::RuntimeError, whose what() says why.
nlohmann::json quarantine_list_json(std::shared_ptr<const policy::Config> cfg, const std::string& database);
nlohmann::json undrop_json(std::shared_ptr<const policy::Config> cfg, const std::string& table, const std::string& as,
                           const std::string& database);

}  // namespace predrop::cli
