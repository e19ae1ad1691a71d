#include "evidence/store_reader.hpp"

#include <cstdlib>
#include <stdexcept>

#include "capture/conninfo.hpp"

namespace predrop::evidence {

using namespace predrop::capture;

namespace {

// Every column the evidence tools read; captured_at printed in UTC so text sorts as time does.
constexpr const char* kColumns =
    "id::text, schema_name, table_name, coalesce(database_name, ''), resource_identity, version, reason, actor, "
    "to_char(captured_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'), column_count, row_count_estimate, "
    "schema_hash, columns_profile::text, stats_available, extra::text, parser_version, normalization_version, "
    "layout_profile, header_quality, is_truncated, drop_outcome, table_oid, extra->>'profile_of'";

std::optional<double> number(const nlohmann::json& j) {
  if (j.is_number()) return j.get<double>();
  if (j.is_string()) {  // tolerate numbers written as text
    char* end = nullptr;
    double d = std::strtod(j.get_ref<const std::string&>().c_str(), &end);
    if (end && *end == '\0') return d;
  }
  return std::nullopt;
}

std::vector<std::string> strings(const nlohmann::json& j) {
  std::vector<std::string> out;
  if (!j.is_array()) return out;
  for (const auto& v : j) {
    if (v.is_string()) out.push_back(v.get<std::string>());
    else if (!v.is_null()) out.push_back(v.dump());
  }
  return out;
}

StoredSnapshot row_to_snapshot(const PgResult& r, int i) {
  StoredSnapshot s;
  s.id = r.text(i, 0);
  s.schema_name = r.text(i, 1);
  s.table_name = r.text(i, 2);
  s.database_name = r.text(i, 3);
  s.resource_identity = r.opt(i, 4);
  if (!r.is_null(i, 5)) s.version = std::atoi(r.text(i, 5).c_str());
  s.reason = r.text(i, 6);
  s.actor = r.text(i, 7);
  s.captured_at = r.text(i, 8);
  s.column_count = std::atoi(r.text(i, 9).c_str());
  if (!r.is_null(i, 10)) s.row_count_estimate = std::strtoll(r.text(i, 10).c_str(), nullptr, 10);
  s.schema_hash = r.text(i, 11);
  auto cols = parse_columns_profile(r.text(i, 12));
  s.profile_ok = cols.has_value();
  if (cols) s.columns = std::move(*cols);
  s.stats_available = r.text(i, 13) == "t";
  s.extra_json = r.is_null(i, 14) ? "" : r.text(i, 14);
  s.provenance.parser_version = r.opt(i, 15);
  s.provenance.normalization_version = r.opt(i, 16);
  s.provenance.layout_profile = r.opt(i, 17);
  s.provenance.header_quality = r.opt(i, 18);
  if (!r.is_null(i, 19)) s.provenance.is_truncated = r.text(i, 19) == "t";
  s.drop_outcome = r.opt(i, 20);
  if (!r.is_null(i, 21)) s.table_oid = std::strtoll(r.text(i, 21).c_str(), nullptr, 10);
  s.profile_of = r.opt(i, 22);
  s.pair_of = r.opt(i, 23);
  return s;
}

}  // namespace

PgSession::PgSession(const std::string& conninfo, const std::string& application_name, const std::string& options)
    : conn_(nullptr, PQfinish) {
  ConnectParams p = connect_params(conninfo, "", application_name, options);
  auto keys = p.key_ptrs();
  auto values = p.value_ptrs();
  conn_.reset(PQconnectdbParams(keys.data(), values.data(), 1));
  if (!conn_ || PQstatus(conn_.get()) != CONNECTION_OK)
    throw std::runtime_error(conn_ ? PQerrorMessage(conn_.get()) : "out of memory");
  // predrop's own statements are small: JIT compiling one costs more than running it (issue 21).
  PQclear(PQexec(conn_.get(), "SET client_min_messages = warning; SET jit = off"));
}

namespace {

PgResult checked(PGresult* res, PGconn* conn) {
  auto st = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
  if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) {
    std::string err = res ? PQresultErrorMessage(res) : PQerrorMessage(conn);
    PQclear(res);
    while (!err.empty() && err.back() == '\n') err.pop_back();
    throw std::runtime_error(err);
  }
  PgResult r;
  r.res.reset(res, PQclear);
  return r;
}

std::vector<const char*> param_values(const Params& params) {
  std::vector<const char*> values;
  for (const auto& p : params) values.push_back(p ? p->c_str() : nullptr);
  return values;
}

}  // namespace

PgResult PgSession::exec(const std::string& sql, const Params& params) {
  auto values = param_values(params);
  return checked(PQexecParams(conn_.get(), sql.c_str(), static_cast<int>(values.size()), nullptr, values.data(),
                              nullptr, nullptr, 0),
                 conn_.get());
}

PgResult PgSession::exec_prepared(const std::string& name, const std::string& sql, const Params& params) {
  auto values = param_values(params);
  if (!prepared_.count(name)) {
    checked(PQprepare(conn_.get(), name.c_str(), sql.c_str(), static_cast<int>(values.size()), nullptr), conn_.get());
    prepared_.insert(name);
  }
  return checked(PQexecPrepared(conn_.get(), name.c_str(), static_cast<int>(values.size()), values.data(), nullptr,
                                nullptr, 0),
                 conn_.get());
}

void PgSession::run(const std::string& sql) {
  PGresult* res = PQexec(conn_.get(), sql.c_str());
  auto st = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
  std::string err = st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK ? "" : PQerrorMessage(conn_.get());
  PQclear(res);
  if (!err.empty()) throw std::runtime_error(err);
}

std::string PgSession::quote_ident(const std::string& name) const {
  char* q = PQescapeIdentifier(conn_.get(), name.c_str(), name.size());
  if (!q) throw std::runtime_error(PQerrorMessage(conn_.get()));
  std::string out(q);
  PQfreemem(q);
  return out;
}

std::string PgSession::quote_qualified(const std::string& name) const {
  auto [schema, table] = split_qualified(name);
  return quote_ident(schema) + "." + quote_ident(table);
}

std::optional<std::vector<ColumnProfile>> parse_columns_profile(const std::string& text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_string()) j = nlohmann::json::parse(j.get<std::string>(), nullptr, false);  // a JSON string holding the array
  if (j.is_discarded() || !j.is_array()) return std::nullopt;
  std::vector<ColumnProfile> out;
  int ordinal = 0;
  for (const auto& e : j) {
    if (!e.is_object() || !e.contains("name") || !e["name"].is_string()) return std::nullopt;
    ColumnProfile c;
    c.name = e["name"].get<std::string>();
    ++ordinal;
    c.ordinal = e.contains("ordinal") && e["ordinal"].is_number() ? e["ordinal"].get<int>() : ordinal;
    c.pg_type = e.contains("pg_type") && e["pg_type"].is_string() ? e["pg_type"].get<std::string>() : "";
    if (e.contains("null_frac")) c.null_frac = number(e["null_frac"]);
    if (e.contains("n_distinct")) c.n_distinct = number(e["n_distinct"]);
    if (e.contains("most_common_vals")) c.most_common_vals = strings(e["most_common_vals"]);
    if (e.contains("histogram_sample")) c.histogram_sample = strings(e["histogram_sample"]);
    out.push_back(std::move(c));
  }
  return out;
}

EvidenceStore::EvidenceStore(const std::string& conninfo, const std::string& store_table)
    : db_(conninfo, "predrop-evidence"), quoted_table_(db_.quote_qualified(store_table)) {
  // The tools only read; say so to the server too.
  db_.run("SET default_transaction_read_only = on");
  // A store migrate has not brought to version 2 (or the reference's own table) has no pair_of:
  // read as NULL there, every snapshot unpaired.
  auto [schema, table] = split_qualified(store_table);
  auto r = db_.exec("SELECT 1 FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace "
                    "WHERE n.nspname = $1 AND c.relname = $2 AND a.attname = 'pair_of' AND NOT a.attisdropped",
                    {schema, table});
  pair_column_ = r.rows() > 0 ? "pair_of::text" : "NULL::text";
}

std::vector<StoredSnapshot> EvidenceStore::query(const std::string& where_order, const Params& params) {
  auto r = db_.exec(std::string("SELECT ") + kColumns + ", " + pair_column_ + " FROM " + quoted_table_ + " " + where_order, params);
  std::vector<StoredSnapshot> out;
  out.reserve(r.rows());
  for (int i = 0; i < r.rows(); ++i) out.push_back(row_to_snapshot(r, i));
  return out;
}

std::optional<StoredSnapshot> EvidenceStore::by_id(const std::string& id) {
  // Compared as text so a malformed id is "not found", not a cast error.
  auto rows = query("WHERE id::text = lower($1)", {id});
  if (rows.empty()) return std::nullopt;
  return rows.front();
}

std::vector<StoredSnapshot> EvidenceStore::latest_of_table(const std::string& schema, const std::string& table, int n) {
  return query("WHERE id IN (SELECT id FROM " +
                   quoted_table_ + " WHERE schema_name = $1 AND table_name = $2 ORDER BY captured_at DESC, id DESC LIMIT $3) "
                   "ORDER BY captured_at, id",
               {schema, table, std::to_string(n)});
}

std::vector<StoredSnapshot> EvidenceStore::latest_of_identity(const std::string& identity, int n) {
  return query("WHERE id IN (SELECT id FROM " + quoted_table_ +
                   " WHERE resource_identity = $1 ORDER BY version DESC NULLS LAST, captured_at DESC LIMIT $2) "
                   "ORDER BY version NULLS FIRST, captured_at, id",
               {identity, std::to_string(n)});
}

std::vector<StoredSnapshot> EvidenceStore::history(const std::string& schema, const std::string& table) {
  return query("WHERE schema_name = $1 AND table_name = $2 ORDER BY captured_at, id", {schema, table});
}

std::vector<StoredSnapshot> EvidenceStore::table_with_pairs(const std::string& schema, const std::string& table) {
  if (!has_pairs()) return history(schema, table);
  // A RENAME TO or SET SCHEMA leaves the before under the old name and the after under the new.
  const std::string of_table = "(SELECT id FROM " + quoted_table_ + " WHERE schema_name = $1 AND table_name = $2)";
  return query("WHERE (schema_name = $1 AND table_name = $2) OR id IN (SELECT pair_of FROM " + quoted_table_ +
                   " WHERE schema_name = $1 AND table_name = $2 AND pair_of IS NOT NULL) OR pair_of IN " + of_table +
                   " ORDER BY captured_at, id",
               {schema, table});
}

std::vector<StoredSnapshot> EvidenceStore::by_ids(const std::vector<std::string>& ids) {
  if (ids.empty()) return {};
  std::string arr = "{";
  for (size_t i = 0; i < ids.size(); ++i) arr += (i ? "," : "") + ids[i];
  arr += "}";
  return query("WHERE id::text = ANY ($1::text[]) ORDER BY captured_at, id", {arr});
}

std::vector<StoredSnapshot> EvidenceStore::window(int days) {
  return query("WHERE captured_at >= now() - make_interval(days => $1::int) ORDER BY schema_name, table_name, captured_at, id",
               {std::to_string(days)});
}

std::vector<StoredSnapshot> EvidenceStore::versioned() {
  return query("WHERE resource_identity IS NOT NULL AND version IS NOT NULL ORDER BY resource_identity, version, captured_at, id",
               {});
}

}  // namespace predrop::evidence
