// The quarantine's SQL (issue 16): the move a quarantined DROP becomes, the schema it moves into,
// the catalog of what is held and the store row that records it. The quarantined table's comment
// is the truth (one JSON object, see move_sql); nothing else is needed to list, purge or
// undrop it, so every function here is plain text and the callers choose the connection.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace predrop::quarantine {

struct QuarantineTarget {
  std::string schema, table;  // schema "" = resolved through the session's search_path
  bool quarantine = true;     // false: dropped for real by the move (a rule that does not quarantine it)
};

struct QuarantineMove {
  std::string quarantine_schema;
  std::vector<QuarantineTarget> tables;  // DROP TABLE's names, in order
  std::vector<std::string> schemas;      // DROP SCHEMA's schemas: every table in them is moved
  bool cascade = false;
  uint64_t max_bytes = 0;  // a table larger than this is not moved (the block raises); 0 = no limit
  // Call the move installed by prepare_sql (move_function_usable) instead of running its
  // body inline, which the server parses and plans at every DROP.
  bool via_function = false;
  // Which hold this move is (proxy/hold.cpp: the process, the session, its place in the session's
  // transaction), written into the comment of every table it moves: the outcome check of another
  // DROP that finds the table quarantined (one waiting on this move's lock, or later in the same
  // transaction, that then moved nothing, as DROP TABLE IF EXISTS does) knows the move is not its own.
  std::string hold_id;
};

// The store's table of quarantined versions (migrations/0003_quarantine.sql): the outcome checks
// record into it, the CLI lists, purges and undrops from it.
inline constexpr const char* kQuarantineStoreTable = "predrop.quarantine";

// The message (its start) of the error a move via_function raises when the function is missing or
// the session may not call it: nothing was moved.
inline constexpr const char* kMoveFunctionMissing = "predrop quarantine: the move function is missing or out of reach";

// ONE statement (a DO block), to run in the dropping session after the real DROP succeeded in a
// savepoint and was rolled back. Each named table is resolved with to_regclass (the session's
// search_path): missing ones are skipped, temporary ones and quarantine=false ones are dropped for
// real, the others (with their partitions, indexes, constraints, triggers, owned sequences and
// privileges) renamed q<oid>_<unix seconds>_<name> and moved into the quarantine schema. A partition
// is detached first; with cascade the dependent views, materialized views and other tables'
// foreign keys are recorded in the comment and dropped. Anything it cannot keep raises an error
// whose message begins "predrop quarantine: ". Leaves the session's settings as they were.
// Throws std::invalid_argument on a name that could break out of the block's quoting.
std::string move_sql(const QuarantineMove& move);
// The same move via_function as PL/pgSQL statements, for a block of the caller's (no DO of its own).
std::string move_statements(const QuarantineMove& move);

// Whether the move's function, as this build installs it, exists for every role to call: one row, one
// boolean column. Run after prepare_sql; the answer is kept with note_move_function.
std::string move_function_check_sql();
// Per database of the upstream server, for the whole process (any thread): where the function is
// known to be usable, the proxy's substitutes call it.
void note_move_function(const std::string& database, bool usable);
bool move_function_usable(const std::string& database);

// Told of each table an outcome check finds quarantined, with its database (any thread): the purger
// inside serve (quarantine/purger.hpp) enforces quarantine.max_tables / max_bytes there at once
// rather than at its next round. One listener per process; an empty function removes it.
void set_table_quarantined_listener(std::function<void(const std::string& database)> listener);
void note_table_quarantined(const std::string& database);

// Run by predrop's capture role in a database: the schema, and CREATE (not USAGE) for everyone,
// so any owner can move a table in and nobody but the schema's owner can reach it afterwards; and
// the move as a function (SECURITY INVOKER) in a schema of its own that everyone may use, where the
// role may create it. ONE statement (a DO block); the grants are set only when the running role
// owns the schema.
std::string prepare_sql(std::string_view schema);

// SQL true when pg_description row `d` (a relation's own comment) is the JSON a move writes on
// the table it quarantines: the one mark of a quarantined table, read by the catalog read, the
// after's statistics poll and catalog_sql alike. jsonb's text form writes `"key": value`.
inline constexpr const char* kQuarantineMarkSql =
    "(d.description LIKE '{%' AND d.description LIKE '%\"predrop\\_quarantine\": 1%')";

// Rows (oldest drop first): quarantine_table text, oid bigint, detail jsonb (the comment), bytes bigint
// (the table with its partitions, indexes and TOAST). measured_given: $1 (text[]) names tables whose
// bytes the caller has (a purger round that measured them), listed with NULL bytes: measuring is
// most of the listing's time (36 of 54 ms for 222 tables).
std::string catalog_sql(std::string_view schema, bool measured_given = false);

// The quarantined tables that use what a later statement drops (issue 22): the owner (DROP ROLE), a
// tablespace, a table or index access method, an operator class or family (a partition key's, an
// index's) or an extension's object (a column's type), each as the tree it belongs to (an index or
// owned sequence stands for its table, a partition for its root). Parameters: $1 the quarantine
// schema, $2..$5 text[] of the yields' kind (to_string(YieldKind)), name, schema ('' = any of $6) and
// method, $6 text[] the search_path's schemas. Rows: n (1-based: which yield), oid bigint, relname,
// comment (the quarantine's JSON, or NULL). Read-only.
std::string yield_find_sql();

// "schema.table" (each part optionally double-quoted) as a quoted identifier pair.
std::string quote_qualified_ident(std::string_view qualified);
std::string quote_ident_always(std::string_view name);

}  // namespace predrop::quarantine
