#include "capture/store_admin.hpp"

#include <libpq-fe.h>

#include <memory>

namespace predrop::capture {

namespace {

using Conn = std::unique_ptr<PGconn, decltype(&PQfinish)>;
using Result = std::unique_ptr<PGresult, decltype(&PQclear)>;

// A short-lived connection: readiness probes must answer quickly, even when the store hangs.
Conn connect(const std::string& conninfo, std::string& error) {
  const char* keys[] = {"dbname", "connect_timeout", "application_name", "options", nullptr};
  const char* vals[] = {conninfo.c_str(), "2", "predrop-admin", "-c statement_timeout=2000", nullptr};
  Conn c(PQconnectdbParams(keys, vals, 1), &PQfinish);
  if (PQstatus(c.get()) != CONNECTION_OK) {
    error = PQerrorMessage(c.get());
    while (!error.empty() && (error.back() == '\n' || error.back() == ' ')) error.pop_back();
    return Conn(nullptr, &PQfinish);
  }
  return c;
}

}  // namespace

std::string store_writable(const std::string& conninfo, const std::string& store_table, const std::string& events_table) {
  std::string error;
  auto c = connect(conninfo, error);
  if (!c) return error;
  const char* params[] = {store_table.c_str(), events_table.c_str()};
  Result r(PQexecParams(c.get(),
                        "SELECT has_table_privilege($1, 'INSERT') AND has_table_privilege($2, 'INSERT'), "
                        "pg_is_in_recovery()",
                        2, nullptr, params, nullptr, nullptr, 0),
           &PQclear);
  if (PQresultStatus(r.get()) != PGRES_TUPLES_OK) {
    error = PQresultErrorMessage(r.get());
    while (!error.empty() && error.back() == '\n') error.pop_back();
    return error;
  }
  if (std::string(PQgetvalue(r.get(), 0, 1)) == "t") return "the store is a read-only standby";
  if (std::string(PQgetvalue(r.get(), 0, 0)) != "t") return "no INSERT privilege on " + store_table + " or " + events_table;
  return {};
}

bool read_recent_events(const std::string& conninfo, const std::string& events_table, int limit, std::string& json,
                        std::string& error) {
  auto c = connect(conninfo, error);
  if (!c) return false;
  std::unique_ptr<char, decltype(&PQfreemem)> ident(PQescapeIdentifier(c.get(), events_table.c_str(), events_table.size()),
                                                    &PQfreemem);
  // A qualified name is two identifiers: quote each part.
  std::string qualified;
  auto dot = events_table.find('.');
  if (dot == std::string::npos) {
    qualified = ident.get();
  } else {
    std::string schema = events_table.substr(0, dot), table = events_table.substr(dot + 1);
    std::unique_ptr<char, decltype(&PQfreemem)> s(PQescapeIdentifier(c.get(), schema.c_str(), schema.size()), &PQfreemem);
    std::unique_ptr<char, decltype(&PQfreemem)> t(PQescapeIdentifier(c.get(), table.c_str(), table.size()), &PQfreemem);
    qualified = std::string(s.get()) + "." + t.get();
  }
  std::string sql = "SELECT coalesce(json_agg(e ORDER BY e.occurred_at DESC), '[]')::text FROM (SELECT * FROM " + qualified +
                    " ORDER BY occurred_at DESC LIMIT $1::int) e";
  std::string lim = std::to_string(limit);
  const char* params[] = {lim.c_str()};
  Result r(PQexecParams(c.get(), sql.c_str(), 1, nullptr, params, nullptr, nullptr, 0), &PQclear);
  if (PQresultStatus(r.get()) != PGRES_TUPLES_OK) {
    error = PQresultErrorMessage(r.get());
    while (!error.empty() && error.back() == '\n') error.pop_back();
    return false;
  }
  json = PQgetvalue(r.get(), 0, 0);
  return true;
}

}  // namespace predrop::capture
