// What a quarantine holds and what can be done with it (issue 16): list, purge and undrop, and the
// store's predrop.quarantine rows, which follow the catalog. The quarantined table's comment is the
// truth (quarantine/move_sql.hpp). Blocking libpq, for `predrop undrop` / `predrop quarantine`
// (cli/quarantine.cpp prints what these return), the console's SHOW QUARANTINE and UNDROP
// (cli/console_commands.cpp) and serve's purger (quarantine/purger.hpp); never on the hold path.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "evidence/store_reader.hpp"
#include "policy/policy.hpp"
#include "quarantine/move_sql.hpp"

namespace predrop::quarantine {

// The quarantine.* keys of a config, in the units the operations use. Their defaults are the
// policy's (policy/policy.hpp), never written here.
struct Settings {
  std::string schema;
  int64_t retention_s = 0;
  uint64_t max_bytes = 0, max_tables = 0;
  int purge_interval_s = 0, lock_timeout_ms = 0;
};
Settings settings_of(const policy::Config& c);

// What an operation could not do; it changed nothing. what() is the whole reason, for a caller to
// print after its own name ("predrop undrop: ...", the console's "UNDROP: ...").
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What went wrong on the way without failing the operation (a database not reached, a store row
// not updated): one line, for the caller to print or log.
using Warn = std::function<void(const std::string&)>;

// Where the operations reach the quarantine: the capture role's conninfo (its dbname is set per
// database) and the store's (may be empty: the catalog is the truth, the store only follows it).
struct Reach {
  Settings settings;
  std::string capture, store;
};
// From the config's capture.conninfo and store.conninfo. Throws Error when there is no capture.
Reach reach_of(const policy::Config& cfg);

// One quarantined table of one database, as catalog_sql lists it.
struct HeldTable {
  std::string database, quarantine_table;
  int64_t oid = 0;
  int64_t bytes = 0;
  int64_t dropped_at = 0;  // unix seconds, from detail.dropped_at
  nlohmann::json detail;
  std::string id() const { return detail.value("id", ""); }
};

// Every database a quarantine may be in: those that allow connections, templates aside, by name;
// read through the capture conninfo (its own database, else postgres).
std::vector<std::string> connectable_databases(const std::string& capture_conninfo, const std::string& application_name);

// Oldest drop first. A missing quarantine schema is an empty list. `measured`: bytes by quarantine
// table, taken for the tables it names instead of measuring them again.
std::vector<HeldTable> list_held(evidence::PgSession& db, const std::string& database, const std::string& schema,
                                 const std::map<std::string, int64_t>* measured = nullptr);

enum class PurgeOutcome { dropped, lock_timeout, gone };
// DROP TABLE of one held table in a transaction of its own under SET LOCAL lock_timeout, so a
// session holding a lock on it makes this give up (lock_timeout) rather than queue the others.
// Throws on any other error.
PurgeOutcome purge_held(evidence::PgSession& db, const std::string& schema, const HeldTable& t, int lock_timeout_ms);
// purge_held of several tables of one database in one transaction (one DROP TABLE naming them
// all): an outcome per table, dropped or gone. nullopt on a lock timeout; any other error throws.
// Nothing is dropped either way: the caller purges them one at a time.
std::optional<std::vector<PurgeOutcome>> purge_held_together(evidence::PgSession& db, const std::string& schema,
                                                             const std::vector<HeldTable>& tables, int lock_timeout_ms);

// The store's rows: inserts a 'held' row for each listed table it lacks; marks one row.
void store_record_held(evidence::PgSession& store, const std::string& schema, const std::vector<HeldTable>& held,
                       int64_t retention_s);
void store_mark(evidence::PgSession& store, const HeldTable& t, const std::string& schema, const std::string& state,
                const std::string& reason);
// store_mark of several tables in one statement, reasons[i] for tables[i].
void store_mark_many(evidence::PgSession& store, const std::vector<HeldTable>& tables, const std::string& schema,
                     const std::string& state, const std::vector<std::string>& reasons);

// "7d", "36h", "90m", "30s" or integer seconds; -1 when it is none of those.
int64_t parse_duration_s(const std::string& text);
// detail.dropped_at ("YYYY-MM-DDTHH:MM:SSZ") as unix seconds; 0 when unreadable.
int64_t parse_utc_seconds(const std::string& iso);

// The quarantined tables of every database (or only `database`), oldest drop first, one object
// each: database, id, schema, table, quarantine_table, bytes, dropped_at, dropped_by, age_s,
// expires_in_s, partitions, dependents, detached. A database it cannot reach is skipped with a
// warning unless `database` named it. Throws Error.
nlohmann::json list(const Reach& reach, const std::string& database, const Warn& warn);

// Restores the newest quarantined version of `qualified` (or the one with `id`) as it was, or as
// `as` (NAME or SCHEMA.NAME), in `database` (default: the capture conninfo's). Returns its report:
// id, database, from, table, dropped_at, restored_from, restored[], not_restored[],
// dependents_recreated[], attached_to. Throws Error, and then restored nothing.
nlohmann::json undrop(const Reach& reach, const std::string& qualified, const std::string& id, const std::string& as,
                      const std::string& database, const Warn& warn);

// `predrop quarantine purge`: the held tables dropped at least older_than_s ago (-1: any age)
// and/or with this id, each in a transaction of its own; `each` is told of every one, dropped or
// skipped because another session holds a lock on it. Throws Error.
struct PurgeRequest {
  std::string database, id;
  int64_t older_than_s = -1;
};
struct PurgeCount {
  int purged = 0, skipped = 0;
};
PurgeCount purge(const Reach& reach, const PurgeRequest& request,
                 const std::function<void(const std::string& what, PurgeOutcome)>& each, const Warn& warn);

}  // namespace predrop::quarantine
