// `predrop migrate` and serve's start-up migration: the embedded numbered SQL files, applied
// under an advisory lock (several sidecars may start at once), each in its own transaction and
// recorded in predrop.schema_migrations per store table. Blocking libpq is right here: this runs
// once, before any client is served.
#include <libpq-fe.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <regex>

#include "capture/capture.hpp"
#include "capture/conninfo.hpp"
#include "capture/migrations_embedded.hpp"
#include "capture/snapshot.hpp"

namespace predrop::capture {

namespace {

// "predrop" in ASCII: a fixed key every predrop binary agrees on.
constexpr const char* kMigrationLockKey = "31654120744398704";

struct ResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
using Result = std::unique_ptr<PGresult, ResultDeleter>;

struct ConnDeleter {
  void operator()(PGconn* c) const { PQfinish(c); }
};

// Runs sql; on failure returns false with the server's message in err.
bool run(PGconn* c, const std::string& sql, std::string& err, Result* out = nullptr,
         const std::vector<std::string>& params = {}) {
  std::vector<const char*> values;
  for (const auto& p : params) values.push_back(p.c_str());
  Result r(params.empty() ? PQexec(c, sql.c_str())
                          : PQexecParams(c, sql.c_str(), static_cast<int>(values.size()), nullptr,
                                         values.data(), nullptr, nullptr, 0));
  auto st = PQresultStatus(r.get());
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
    err = PQresultErrorMessage(r.get());
    while (!err.empty() && (err.back() == '\n' || err.back() == ' ')) err.pop_back();
    return false;
  }
  if (out) *out = std::move(r);
  return true;
}

std::string quote_ident(PGconn* c, const std::string& s) {
  char* q = PQescapeIdentifier(c, s.data(), s.size());
  std::string out = q ? q : "\"\"";
  if (q) PQfreemem(q);
  return out;
}

// Fills the placeholders with quoted identifiers (see the header of migrations/0001_store.sql).
std::string render(PGconn* c, const std::string& sql, const std::string& schema, const std::string& table) {
  std::string out = sql;
  replace_all(out, "{{store_schema}}", quote_ident(c, schema));
  replace_all(out, "{{store_table}}", quote_ident(c, schema) + "." + quote_ident(c, table));
  static const std::regex ix(R"(\{\{ix:([A-Za-z0-9_]+)\}\})");
  std::string result;
  auto begin = std::sregex_iterator(out.begin(), out.end(), ix);
  size_t last = 0;
  for (auto it = begin; it != std::sregex_iterator(); ++it) {
    result.append(out, last, it->position() - last);
    // Index names live in the table's schema and are limited to 63 bytes like any name.
    std::string name = "ix_" + table + "_" + (*it)[1].str();
    if (name.size() > 63) name.resize(63);
    result += quote_ident(c, name);
    last = it->position() + it->length();
  }
  result.append(out, last, std::string::npos);
  return result;
}

}  // namespace

MigrateResult migrate(const std::string& store_conninfo, const std::string& store_table) {
  MigrateResult res;
  const auto& migrations = embedded_migrations();
  const int known = migrations.empty() ? 0 : migrations.back().version;
  auto [schema, table] = split_qualified(store_table.empty() ? "predrop.schema_snapshots" : store_table);
  const std::string table_key = schema + "." + table;

  auto params = connect_params(store_conninfo, "", "predrop-migrate", "");
  auto keys = params.key_ptrs();
  auto values = params.value_ptrs();
  std::unique_ptr<PGconn, ConnDeleter> conn(PQconnectdbParams(keys.data(), values.data(), 1));
  if (PQstatus(conn.get()) != CONNECTION_OK) {
    res.error = std::string("cannot connect to the store (") + mask_conninfo(store_conninfo) +
                "): " + PQerrorMessage(conn.get());
    while (!res.error.empty() && res.error.back() == '\n') res.error.pop_back();
    return res;
  }
  res.reached = true;
  PGconn* c = conn.get();
  std::string err;
  // Session-level lock: held across the per-file transactions, released by PQfinish at worst.
  if (!run(c, std::string("SELECT pg_advisory_lock(") + kMigrationLockKey + ")", err)) {
    res.error = "advisory lock: " + err;
    return res;
  }
  // Never queue behind a long lock on the store's tables for ever.
  run(c, "SET lock_timeout = '30s'", err);
  run(c, "SET client_min_messages = warning", err);  // IF NOT EXISTS notices are expected

  const char* bootstrap =
      "CREATE SCHEMA IF NOT EXISTS predrop;"
      "CREATE TABLE IF NOT EXISTS predrop.schema_migrations ("
      "  version integer NOT NULL,"
      "  store_table text NOT NULL,"
      "  name text NOT NULL,"
      "  applied_at timestamptz NOT NULL DEFAULT now(),"
      "  PRIMARY KEY (version, store_table))";
  Result r;
  if (!run(c, bootstrap, err) ||
      !run(c, "SELECT coalesce(max(version), 0), coalesce(max(version) FILTER (WHERE store_table = $1), 0) "
              "FROM predrop.schema_migrations",
           err, &r, {table_key})) {
    res.error = "version table: " + err;
    return res;
  }
  const int newest = std::atoi(PQgetvalue(r.get(), 0, 0));
  res.from_version = std::atoi(PQgetvalue(r.get(), 0, 1));
  res.to_version = res.from_version;
  if (newest > known) {
    res.error = "the store is at migration version " + std::to_string(newest) +
                ", newer than this predrop knows (" + std::to_string(known) + "); upgrade predrop";
    return res;
  }
  for (const auto& m : migrations) {
    if (m.version <= res.from_version) continue;
    std::string sql = render(c, m.sql, schema, table);
    if (!run(c, "BEGIN", err) || !run(c, sql, err) ||
        !run(c, "INSERT INTO predrop.schema_migrations (version, store_table, name) VALUES ($1, $2, $3)", err,
             nullptr, {std::to_string(m.version), table_key, m.name}) ||
        !run(c, "COMMIT", err)) {
      std::string ignored;
      run(c, "ROLLBACK", ignored);
      res.error = std::string("migration ") + m.name + " on " + table_key + ": " + err;
      return res;
    }
    spdlog::info("store migration {} applied ({})", m.name, table_key);
    res.to_version = m.version;
  }
  run(c, std::string("SELECT pg_advisory_unlock(") + kMigrationLockKey + ")", err);
  res.ok = true;
  return res;
}

}  // namespace predrop::capture
