// Reading snapshots back out of the store for the evidence tools (diff, history, report, ddl),
// over one blocking libpq connection: these are short command-line runs, not the proxy's path.
#pragma once

#include <libpq-fe.h>

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "evidence/diff.hpp"
#include "capture/pg_async.hpp"

namespace predrop::evidence {

// One blocking connection. Errors throw std::runtime_error with the server's message (the
// conninfo's password never appears in it).
class PgSession {
 public:
  // options: extra server settings ("-c default_transaction_read_only=on"), may be empty.
  explicit PgSession(const std::string& conninfo, const std::string& application_name = "predrop",
                     const std::string& options = "");
  capture::PgResult exec(const std::string& sql, const capture::Params& params = {});
  // exec() of a statement prepared on this session the first time `name` is used: a batched
  // statement run many times is parsed (and, with plan_cache_mode=force_generic_plan, planned)
  // once. The same name must always carry the same sql.
  capture::PgResult exec_prepared(const std::string& name, const std::string& sql, const capture::Params& params = {});
  // Several statements, no parameters, results discarded.
  void run(const std::string& sql);
  std::string quote_ident(const std::string& name) const;
  // "schema.table" (either part possibly quoted) as a quoted, qualified name.
  std::string quote_qualified(const std::string& name) const;
  PGconn* raw() const { return conn_.get(); }

 private:
  std::unique_ptr<PGconn, void (*)(PGconn*)> conn_;
  std::set<std::string> prepared_;
};

// columns_profile text (a JSON array, or a JSON string holding one, as older writers left it) to
// columns; nullopt when it cannot be read.
std::optional<std::vector<capture::ColumnProfile>> parse_columns_profile(const std::string& text);

class EvidenceStore {
 public:
  EvidenceStore(const std::string& conninfo, const std::string& store_table = "predrop.schema_snapshots");

  std::optional<StoredSnapshot> by_id(const std::string& id);
  // Oldest first. latest_*: at most n, the newest ones.
  std::vector<StoredSnapshot> latest_of_table(const std::string& schema, const std::string& table, int n = 2);
  std::vector<StoredSnapshot> latest_of_identity(const std::string& identity, int n = 2);
  std::vector<StoredSnapshot> history(const std::string& schema, const std::string& table);
  // history() plus the befores its afters complete and the afters completing its befores (a
  // RENAME TO or SET SCHEMA pair spans two names); oldest first.
  std::vector<StoredSnapshot> table_with_pairs(const std::string& schema, const std::string& table);
  // ids are uuid text (lower case); unknown ones are left out. Oldest first.
  std::vector<StoredSnapshot> by_ids(const std::vector<std::string>& ids);
  // The table has pair_of (store version 2).
  bool has_pairs() const { return pair_column_ != "NULL::text"; }
  // same_table pairs: snapshots captured in the last `days` days, by (schema, table, captured_at).
  std::vector<StoredSnapshot> window(int days);
  // version pairs (not windowed): identity and version both set, by (identity, version, captured_at).
  std::vector<StoredSnapshot> versioned();

  PgSession& session() { return db_; }
  const std::string& table() const { return quoted_table_; }

 private:
  std::vector<StoredSnapshot> query(const std::string& where_order, const capture::Params& params);
  PgSession db_;
  std::string quoted_table_;
  std::string pair_column_;
};

}  // namespace predrop::evidence
