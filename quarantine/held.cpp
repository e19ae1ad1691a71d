#include "quarantine/held.hpp"

#include <libpq-fe.h>

#include <algorithm>
#include <cctype>
#include <ctime>
#include <map>
#include <set>

#include "capture/snapshot.hpp"
#include "quarantine/store_rows.hpp"
#include "evidence/fleet_schedule.hpp"

namespace predrop::quarantine {

using capture::Params;
using evidence::PgSession;
using evidence::conninfo_or_dbname;
using evidence::conninfo_with_dbname;
using nlohmann::json;

Settings settings_of(const policy::Config& c) {
  Settings s;
  s.schema = c.quarantine_schema;
  s.retention_s = static_cast<int64_t>(c.quarantine_retention_s);
  s.max_bytes = static_cast<uint64_t>(c.quarantine_max_bytes);
  s.max_tables = static_cast<uint64_t>(c.quarantine_max_tables);
  s.purge_interval_s = static_cast<int>(c.quarantine_purge_interval_s);
  s.lock_timeout_ms = static_cast<int>(c.quarantine_lock_timeout_ms);
  return s;
}

Reach reach_of(const policy::Config& cfg) {
  if (cfg.capture_conninfo.empty()) throw Error("capture.conninfo is required");
  return Reach{settings_of(cfg), cfg.capture_conninfo, cfg.store_conninfo};
}

namespace {

std::string q(const std::string& ident) { return quote_ident_always(ident); }

std::string literal(PgSession& db, const std::string& s) {
  char* l = PQescapeLiteral(db.raw(), s.data(), s.size());
  if (!l) throw std::runtime_error(PQerrorMessage(db.raw()));
  std::string out(l);
  PQfreemem(l);
  return out;
}

std::string str(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// The database of --database, else the one the conninfo names (libpq's default if none).
std::string conninfo_for(const Reach& c, const std::string& database) {
  return database.empty() ? c.capture : conninfo_with_dbname(c.capture, database);
}

std::vector<std::string> databases(const Reach& c, const std::string& only) {
  if (!only.empty()) return {only};
  return connectable_databases(c.capture, "predrop-quarantine");
}

bool database_exists(const Reach& c, const std::string& dbname) {
  const auto now = connectable_databases(c.capture, "predrop-quarantine");
  return std::find(now.begin(), now.end(), dbname) != now.end();
}

// Runs fn(database, session) on each database the command covers. A database it cannot connect to
// is skipped with a warning, unless --database named it: then that is the command's error. So is
// one dropped while fn read it (DROP DATABASE ... WITH (FORCE) ends the session mid-query): on a
// shared server databases come and go, and one going must not cost the operator the others' list.
void for_each_database(const Reach& c, const std::string& only, const std::string& skipped_as, const Warn& warn,
                       const std::function<void(const std::string&, PgSession&)>& fn) {
  for (const auto& dbname : databases(c, only)) {
    std::unique_ptr<PgSession> db;
    try {
      db = std::make_unique<PgSession>(conninfo_with_dbname(c.capture, dbname), "predrop-quarantine");
    } catch (const std::exception& e) {
      if (!only.empty()) throw;
      warn("database " + dbname + " " + skipped_as + ": " + e.what());
      continue;
    }
    try {
      fn(dbname, *db);
    } catch (const std::exception& e) {
      if (!only.empty() || PQstatus(db->raw()) == CONNECTION_OK) throw;
      // The session was ended under fn. DROP DATABASE ends the sessions before its own commit, so
      // the catalog may still list the database; a new connection waits for the DROP to finish
      // (the backend locks the database at startup) and then fails if it is gone.
      bool gone = false;
      try {
        PgSession again(conninfo_with_dbname(c.capture, dbname), "predrop-quarantine");
      } catch (const std::exception&) {
        try {
          gone = !database_exists(c, dbname);
        } catch (const std::exception&) {
          // The server itself is unreachable: fn's error is the one to report.
        }
      }
      if (!gone) throw;
      warn("database " + dbname + " " + skipped_as + ": dropped while it was read (" + e.what() + ")");
    }
  }
}

std::unique_ptr<PgSession> open_store(const Reach& c, const Warn& warn) {
  if (c.store.empty()) return nullptr;
  try {
    return std::make_unique<PgSession>(c.store, "predrop-quarantine");
  } catch (const std::exception& e) {
    warn(std::string("store unreachable, its rows are not updated: ") + e.what());
    return nullptr;
  }
}

int64_t server_now(PgSession& db) { return std::stoll(db.exec("SELECT extract(epoch FROM now())::bigint").text(0, 0)); }

bool relation_exists(PgSession& db, const std::string& schema, const std::string& name) {
  return db.exec("SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                 "WHERE n.nspname = $1 AND c.relname = $2",
                 Params{schema, name})
             .rows() > 0;
}

std::string database_of(PgSession& db) { return db.exec("SELECT current_database()").text(0, 0); }

// ---- undrop ----

struct Undrop {
  Undrop(PgSession& session, const std::string& quarantine_schema) : db(session), qschema(quarantine_schema) {}
  PgSession& db;
  const std::string& qschema;
  json report = {{"restored", json::array()}, {"not_restored", json::array()}, {"dependents_recreated", json::array()}};
  // The name a restored relation has now, by its OID, where it is not its name at the move.
  std::map<int64_t, std::string> renamed_to;

  void not_restored(const std::string& kind, const std::string& name, const std::string& reason) {
    report["not_restored"].push_back({{"kind", kind}, {"name", name}, {"reason", reason}});
  }

  void set_comment(const std::string& schema, const std::string& name, const json& comment) {
    db.run("COMMENT ON TABLE " + q(schema) + "." + q(name) + " IS " +
           (comment.is_string() ? literal(db, comment.get<std::string>()) : std::string("NULL")));
  }

  // One relation (the table or one of its partitions) back into `schema` as `name`, its indexes
  // and sequences under their original names where those are free, and its original comment.
  void restore_relation(const json& rel, const std::string& schema, const std::string& name) {
    const std::string qtable = str(rel, "quarantine_table");
    db.run("ALTER TABLE " + q(qschema) + "." + q(qtable) + " SET SCHEMA " + q(schema));
    db.run("ALTER TABLE " + q(schema) + "." + q(qtable) + " RENAME TO " + q(name));
    const std::string oid = std::to_string(rel.value("oid", int64_t{0}));
    for (const auto& r : rel.value("relations", json::array())) {
      const std::string kind = str(r, "kind"), orig = str(r, "name");
      const std::string qname = "q" + oid + (kind == "index" ? "_i" : "_s") + std::to_string(r.value("oid", int64_t{0}));
      if (!relation_exists(db, schema, qname)) {
        not_restored(kind, orig, "not found as " + qname);
      } else if (relation_exists(db, schema, orig)) {
        not_restored(kind, orig, "name taken; kept as " + qname);
      } else {
        db.run(std::string("ALTER ") + (kind == "index" ? "INDEX " : "SEQUENCE ") + q(schema) + "." + q(qname) +
               " RENAME TO " + q(orig));
        report["restored"].push_back({{"kind", kind}, {"name", orig}});
      }
    }
    set_comment(schema, name, rel.contains("comment") ? rel["comment"] : json());
    // The move gave the table to the quarantine's owner: its owner gets it back.
    if (rel.contains("owner_was") && rel["owner_was"].is_string()) {
      const std::string owner = rel["owner_was"].get<std::string>();
      std::string err;
      if (attempt("ALTER TABLE " + q(schema) + "." + q(name) + " OWNER TO " + owner, err))
        report["restored"].push_back({{"kind", "owner"}, {"name", owner}});
      else
        not_restored("owner", owner, err);
    }
    if (schema != str(rel, "schema") || name != str(rel, "table"))
      renamed_to[rel.value("oid", int64_t{0})] = q(schema) + "." + q(name);
  }

  // What the move detached from the tables (column types, triggers, rules, foreign keys, checks,
  // defaults, grants: quarantine/move_sql.cpp), as definitions to run again, on the names the tables
  // have now. A piece with no definition was cloned from a partition's parent and came back with
  // the ATTACH.
  json detached_to_recreate(const json& detached) const {
    json out = json::array();
    for (const auto& p : detached) {
      if (!p.contains("definition") || !p["definition"].is_string()) continue;
      std::string def = p["definition"].get<std::string>();
      auto it = renamed_to.find(p.value("on_oid", int64_t{0}));
      const std::string on = str(p, "on");
      if (it != renamed_to.end() && !on.empty()) {
        // The name as a whole word: public.sales, not the front of public.sales_archive.
        auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$' || c == '"' || c == '.'; };
        for (size_t at = def.find(on); at != std::string::npos;) {
          const size_t end = at + on.size();
          if ((at == 0 || !word(def[at - 1])) && (end == def.size() || !word(def[end]))) {
            def.replace(at, on.size(), it->second);
            at = def.find(on, at + it->second.size());
          } else {
            at = def.find(on, at + 1);
          }
        }
      }
      out.push_back({{"kind", str(p, "kind")}, {"schema", it != renamed_to.end() ? it->second : on},
                     {"name", str(p, "name")}, {"definition", def}});
    }
    return out;
  }

  // Runs sql in a savepoint; false (and the error in err) when it failed, the transaction intact.
  bool attempt(const std::string& sql, std::string& err) {
    db.run("SAVEPOINT predrop_undrop");
    try {
      db.run(sql);
      db.run("RELEASE SAVEPOINT predrop_undrop");
      return true;
    } catch (const std::exception& e) {
      err = e.what();
      while (!err.empty() && (err.back() == '\n' || err.back() == ' ')) err.pop_back();
      db.run("ROLLBACK TO SAVEPOINT predrop_undrop");
      return false;
    }
  }

  // Dependents in any order: one that needs another (a view on a view) is retried after it.
  void recreate_dependents(const json& deps) {
    std::vector<json> pending(deps.begin(), deps.end());
    std::vector<std::string> errors(pending.size());
    for (bool progress = true; progress && !pending.empty();) {
      progress = false;
      std::vector<json> left;
      std::vector<std::string> left_errors;
      for (size_t i = 0; i < pending.size(); ++i) {
        std::string err;
        if (attempt(str(pending[i], "definition"), err)) {
          report["dependents_recreated"].push_back({{"kind", str(pending[i], "kind")},
                                                    {"schema", str(pending[i], "schema")},
                                                    {"name", str(pending[i], "name")}});
          progress = true;
        } else {
          left.push_back(pending[i]);
          left_errors.push_back(err);
        }
      }
      pending.swap(left);
      errors.swap(left_errors);
    }
    for (size_t i = 0; i < pending.size(); ++i)
      not_restored(str(pending[i], "kind"), str(pending[i], "schema") + "." + str(pending[i], "name"), errors[i]);
  }
};

// Why a version is not in quarantine any more when the store says it was purged (by age, a cap, by
// hand, or to let a later statement through: "yielded to DROP ROLE r"): the newest such row.
std::string purged_note(const Reach& ctx, const std::string& dbname, const std::string& schema,
                        const std::string& table, const std::string& id, const Warn& warn) {
  auto store = open_store(ctx, warn);
  if (!store) return "";
  try {
    auto r = store->exec(std::string("SELECT to_char(dropped_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS'), "
                                     "to_char(state_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS'), "
                                     "coalesce(state_reason, '') FROM ") +
                             kQuarantineStoreTable +
                             " WHERE database_name = $1 AND schema_name = $2 AND table_name = $3 AND state = 'purged'"
                             " AND ($4 = '' OR id::text = $4) ORDER BY dropped_at DESC LIMIT 1",
                         Params{dbname, schema, table, id});
    if (r.rows() == 0) return "";
    return "; the newest version (dropped " + r.text(0, 0) + " UTC) was purged " + r.text(0, 1) + " UTC (" +
           r.text(0, 2) + "); its snapshot stays in the store";
  } catch (const std::exception&) {
    return "";
  }
}

// Restores the newest quarantined version of table (or the one with this id); its report as JSON.
// Throws Error with what was not possible; nothing is restored then.
json undrop_table(const Reach& ctx, const std::string& qualified, const std::string& id, const std::string& as,
                  const std::string& database, const Warn& warn) {
  auto [schema, table] = capture::split_qualified(qualified);
  try {
    PgSession db(conninfo_for(ctx, database), "predrop-undrop");
    const std::string dbname = database_of(db);
    auto held = list_held(db, dbname, ctx.settings.schema);
    const HeldTable* pick = nullptr;
    for (const auto& h : held)
      if (str(h.detail, "schema") == schema && str(h.detail, "table") == table && (id.empty() || h.id() == id))
        pick = &h;  // oldest first: the last match is the newest
    if (!pick)
      throw Error("no quarantined version of " + schema + "." + table + (id.empty() ? "" : " with id " + id) +
                         " in database " + dbname + purged_note(ctx, dbname, schema, table, id, warn));
    std::string to_schema = schema, to_name = table;
    if (!as.empty()) {
      if (as.find('.') != std::string::npos) std::tie(to_schema, to_name) = capture::split_qualified(as);
      else to_name = as;
    }
    if (relation_exists(db, to_schema, to_name))
      throw Error(to_schema + "." + to_name + " exists; restore under another name with --as NAME");
    const bool renamed = to_schema != schema || to_name != table;
    const json& d = pick->detail;
    Undrop u{db, ctx.settings.schema};
    db.run("BEGIN");
    try {
      u.restore_relation(d, to_schema, to_name);
      for (const auto& m : d.value("members", json::array())) {
        std::string name = str(m, "table");
        if (relation_exists(db, str(m, "schema"), name)) {
          u.not_restored("partition", str(m, "schema") + "." + name, "name taken; kept as " + str(m, "quarantine_table"));
          name = str(m, "quarantine_table");
        }
        u.restore_relation(m, str(m, "schema"), name);
      }
      // A column's type comes back before the ATTACH: a partition must match its parent's.
      json again = u.detached_to_recreate(d.value("detached", json::array()));
      json column_types = json::array(), rest = json::array();
      for (auto& p : again) (str(p, "kind") == "column_type" ? column_types : rest).push_back(std::move(p));
      u.recreate_dependents(column_types);
      if (d.contains("partition_of") && d["partition_of"].is_object()) {
        const std::string parent = str(d["partition_of"], "parent"), bound = str(d["partition_of"], "bound");
        std::string err;
        if (db.exec("SELECT to_regclass($1) IS NOT NULL", Params{parent}).text(0, 0) != "t")
          u.not_restored("partition_of", parent, "the parent table no longer exists; left detached");
        else if (!u.attempt("ALTER TABLE " + parent + " ATTACH PARTITION " + q(to_schema) + "." + q(to_name) + " " + bound, err))
          u.not_restored("partition_of", parent, err + "; left detached");
        else
          u.report["attached_to"] = parent;
      }
      const json deps = d.value("dependents", json::array());
      again = std::move(rest);
      if (renamed) {
        for (const auto& dep : deps)
          u.not_restored(str(dep, "kind"), str(dep, "schema") + "." + str(dep, "name"),
                         "not recreated: the table is restored under another name; its definition: " + str(dep, "definition"));
      } else {
        for (const auto& dep : deps) again.push_back(dep);
      }
      u.recreate_dependents(again);
      db.run("COMMIT");
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      try {
        db.run("ROLLBACK");
      } catch (...) {
      }
      throw Error(std::string("nothing restored: ") + e.what());
    }
    if (auto store = open_store(ctx, warn)) {
      try {
        store_mark(*store, *pick, ctx.settings.schema, "restored", "undrop");
      } catch (const std::exception& e) {
        warn(std::string("store row not updated: ") + e.what());
      }
    }
    json& r = u.report;
    r["id"] = pick->id();
    r["database"] = dbname;
    r["from"] = ctx.settings.schema + "." + pick->quarantine_table;
    r["table"] = to_schema + "." + to_name;
    r["dropped_at"] = str(d, "dropped_at");
    r["restored_from"] = schema + "." + table;
    return r;
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(e.what());
  }
}

json list_quarantine(const Reach& ctx, const std::string& database, const Warn& warn) {
  json all = json::array();
  try {
    for_each_database(ctx, database, "not listed", warn, [&](const std::string& dbname, PgSession& db) {
      const int64_t now = server_now(db);
      for (const auto& h : list_held(db, dbname, ctx.settings.schema)) {
        all.push_back({{"database", dbname},
                       {"id", h.id()},
                       {"schema", str(h.detail, "schema")},
                       {"table", str(h.detail, "table")},
                       {"quarantine_table", ctx.settings.schema + "." + h.quarantine_table},
                       {"bytes", h.bytes},
                       {"dropped_at", str(h.detail, "dropped_at")},
                       {"dropped_by", str(h.detail, "dropped_by")},
                       {"age_s", now - h.dropped_at},
                       {"expires_in_s", h.dropped_at + ctx.settings.retention_s - now},
                       {"partitions", h.detail.value("members", json::array()).size()},
                       {"dependents", h.detail.value("dependents", json::array()).size()},
                       {"detached", h.detail.value("detached", json::array()).size()}});
      }
    });
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(e.what());
  }
  return all;
}

}  // namespace

std::vector<std::string> connectable_databases(const std::string& capture_conninfo, const std::string& application_name) {
  PgSession db(conninfo_or_dbname(capture_conninfo, "postgres"), application_name);
  auto r = db.exec("SELECT datname FROM pg_database WHERE datallowconn AND NOT datistemplate ORDER BY datname");
  std::vector<std::string> out;
  for (int i = 0; i < r.rows(); ++i) out.push_back(r.text(i, 0));
  return out;
}

std::vector<HeldTable> list_held(PgSession& db, const std::string& database, const std::string& schema,
                                 const std::map<std::string, int64_t>* measured) {
  std::vector<HeldTable> out;
  if (db.exec("SELECT 1 FROM pg_namespace WHERE nspname = $1", Params{schema}).rows() == 0) return out;
  Params params;
  if (measured) {
    std::vector<std::optional<std::string>> names;
    for (const auto& [name, bytes] : *measured) names.push_back(name);
    params.push_back(capture::pg_array_literal(names));
  }
  auto r = db.exec(catalog_sql(schema, measured != nullptr), params);
  for (int i = 0; i < r.rows(); ++i) {
    HeldTable h;
    h.database = database;
    h.quarantine_table = r.text(i, 0);
    h.oid = std::stoll(r.text(i, 1));
    h.detail = json::parse(r.text(i, 2), nullptr, false);
    if (h.detail.is_discarded() || !h.detail.is_object()) continue;
    if (!r.is_null(i, 3)) h.bytes = std::stoll(r.text(i, 3));
    else if (measured)
      if (auto it = measured->find(h.quarantine_table); it != measured->end()) h.bytes = it->second;
    h.dropped_at = parse_utc_seconds(str(h.detail, "dropped_at"));
    out.push_back(std::move(h));
  }
  return out;
}

// Each table is checked by OID and name first: a name listed a moment ago may have been restored
// and reused since. A lot dropped in one transaction costs the server 0.30 ms a table, one at a
// time 1.02 (100 analysed 200-row tables, direct): under a churn at a cap the purger drops a table
// a DROP.
std::optional<std::vector<PurgeOutcome>> purge_held_together(PgSession& db, const std::string& schema,
                                                             const std::vector<HeldTable>& tables, int lock_timeout_ms) {
  db.run("BEGIN");
  try {
    db.run("SET LOCAL lock_timeout = " + std::to_string(std::max(lock_timeout_ms, 1)));
    std::vector<std::optional<std::string>> oids, names;
    for (const auto& t : tables) oids.push_back(std::to_string(t.oid)), names.push_back(t.quarantine_table);
    auto r = db.exec("SELECT c.oid::bigint FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                     "JOIN unnest($1::bigint[], $2::text[]) AS t(oid, name) ON c.oid = t.oid::oid AND c.relname = t.name "
                     "WHERE n.nspname = $3",
                     Params{capture::pg_array_literal(oids), capture::pg_array_literal(names), schema});
    std::set<int64_t> present;
    for (int i = 0; i < r.rows(); ++i) present.insert(std::stoll(r.text(i, 0)));
    std::string drop;
    std::vector<PurgeOutcome> out;
    for (const auto& t : tables) {
      const bool there = present.count(t.oid) > 0;
      out.push_back(there ? PurgeOutcome::dropped : PurgeOutcome::gone);
      if (there) drop += (drop.empty() ? "DROP TABLE " : ", ") + q(schema) + "." + q(t.quarantine_table);
    }
    // CASCADE: a foreign key between two tables quarantined together goes with the first.
    if (!drop.empty()) db.run(drop + " CASCADE");
    db.run("COMMIT");
    return out;
  } catch (const std::exception& e) {
    const std::string msg = e.what();
    try {
      db.run("ROLLBACK");
    } catch (...) {
    }
    if (msg.find("lock timeout") != std::string::npos) return std::nullopt;
    throw;
  }
}

namespace {

// The arrays in step that record_many_sql and mark_many_sql unnest.
struct RowArrays {
  std::string databases, details, tables, bytes;
};

RowArrays row_arrays(const std::vector<HeldTable>& held) {
  std::vector<std::optional<std::string>> databases, details, tables, bytes;
  for (const auto& h : held) {
    databases.push_back(h.database);
    details.push_back(h.detail.dump());
    tables.push_back(h.quarantine_table);
    bytes.push_back(std::to_string(h.bytes));
  }
  return {capture::pg_array_literal(databases), capture::pg_array_literal(details), capture::pg_array_literal(tables),
          capture::pg_array_literal(bytes)};
}

}  // namespace

PurgeOutcome purge_held(PgSession& db, const std::string& schema, const HeldTable& t, int lock_timeout_ms) {
  auto out = purge_held_together(db, schema, {t}, lock_timeout_ms);
  return out ? out->front() : PurgeOutcome::lock_timeout;
}

void store_record_held(PgSession& store, const std::string& schema, const std::vector<HeldTable>& held, int64_t retention_s) {
  // One statement: a purger round writes every held table's row, and under a churn one statement
  // a row (200 a round at max_tables 200) cost the server more than the DROPs.
  if (held.empty()) return;
  const RowArrays a = row_arrays(held);
  store.exec(record_many_sql(kQuarantineStoreTable),
             Params{a.databases, a.details, schema, a.tables, a.bytes, std::nullopt, std::nullopt,
                    std::to_string(retention_s), std::nullopt, std::nullopt});
}

void store_mark(PgSession& store, const HeldTable& t, const std::string& schema, const std::string& state,
                const std::string& reason) {
  store_mark_many(store, {t}, schema, state, {reason});
}

void store_mark_many(PgSession& store, const std::vector<HeldTable>& tables, const std::string& schema,
                     const std::string& state, const std::vector<std::string>& reasons) {
  // One statement, not an INSERT and then an UPDATE a row: the purger marks a row at every purge,
  // one a recreate cycle under a churn at the cap.
  if (tables.empty()) return;
  const RowArrays a = row_arrays(tables);
  std::vector<std::optional<std::string>> why;
  for (size_t i = 0; i < tables.size(); ++i) why.push_back(i < reasons.size() ? std::optional(reasons[i]) : std::nullopt);
  store.exec(mark_many_sql(kQuarantineStoreTable),
             Params{a.databases, a.details, schema, a.tables, a.bytes, std::nullopt, std::nullopt, "0", std::nullopt,
                    std::nullopt, state, capture::pg_array_literal(why)});
}

int64_t parse_duration_s(const std::string& text) {
  if (text.empty()) return -1;
  size_t used = 0;
  long long n = 0;
  try {
    n = std::stoll(text, &used);
  } catch (...) {
    return -1;
  }
  if (n < 0) return -1;
  const std::string unit = text.substr(used);
  if (unit.empty() || unit == "s") return n;
  if (unit == "m") return n * 60;
  if (unit == "h") return n * 3600;
  if (unit == "d") return n * 86400;
  return -1;
}

int64_t parse_utc_seconds(const std::string& iso) {
  std::tm tm{};
  if (!strptime(iso.c_str(), "%Y-%m-%dT%H:%M:%SZ", &tm)) return 0;
  return static_cast<int64_t>(timegm(&tm));
}

json list(const Reach& reach, const std::string& database, const Warn& warn) {
  return list_quarantine(reach, database, warn);
}

json undrop(const Reach& reach, const std::string& qualified, const std::string& id, const std::string& as,
            const std::string& database, const Warn& warn) {
  return undrop_table(reach, qualified, id, as, database, warn);
}

PurgeCount purge(const Reach& reach, const PurgeRequest& request,
                 const std::function<void(const std::string& what, PurgeOutcome)>& each, const Warn& warn) {
  if (request.older_than_s < 0 && request.id.empty()) throw Error("--older-than DURATION or --id ID is required");
  auto store = open_store(reach, warn);
  PurgeCount count;
  try {
    for_each_database(reach, request.database, "not reached", warn, [&](const std::string& dbname, PgSession& db) {
      const int64_t now = server_now(db);
      for (const auto& h : list_held(db, dbname, reach.settings.schema)) {
        if (!request.id.empty() && h.id() != request.id) continue;
        if (request.older_than_s >= 0 && now - h.dropped_at < request.older_than_s) continue;
        const std::string what = dbname + " " + str(h.detail, "schema") + "." + str(h.detail, "table") + " (id " + h.id() + ")";
        auto outcome = purge_held(db, reach.settings.schema, h, std::max(reach.settings.lock_timeout_ms, 1000));
        each(what, outcome);
        if (outcome == PurgeOutcome::lock_timeout) {
          ++count.skipped;
          continue;
        }
        ++count.purged;
        if (store) {
          try {
            store_mark(*store, h, reach.settings.schema, "purged", "manual");
          } catch (const std::exception& e) {
            warn(std::string("store row not updated: ") + e.what());
          }
        }
      }
    });
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(e.what());
  }
  return count;
}

}  // namespace predrop::quarantine
