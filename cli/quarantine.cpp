#include "cli/quarantine.hpp"

#include <cctype>
#include <ctime>
#include <functional>
#include <iostream>
#include <map>

#include "capture/quarantine_sql.hpp"
#include "capture/snapshot.hpp"
#include "cli/fleet_schedule.hpp"
#include "cli/evidence_support.hpp"

namespace predrop::cli {

using capture::Params;
using evidence::PgSession;
using nlohmann::json;

namespace {

std::string q(const std::string& ident) { return capture::quote_ident_always(ident); }

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

struct QFlags {
  std::string config, capture, store, database, id, as, older_than, format = "text";
  std::string table;
  // debug-quarantine-move (test-only)
  std::vector<std::string> names, real_names, schemas;
  std::string qschema = policy::Config().quarantine_schema;
  bool cascade = false, prepare = false, catalog = false;
  uint64_t max_bytes = 0;
};

struct Context {
  std::shared_ptr<const policy::Config> cfg;
  QuarantineSettings qs;
  std::string capture;  // conninfo; dbname set per database
  std::string store;    // may be empty: the catalog is the truth, the store only follows it
};

Context context(const std::string& cmd, const QFlags& f) {
  auto loaded = f.config.empty() ? policy::load_defaults() : policy::load_file(f.config);
  if (!loaded.errors.empty()) {
    for (const auto& e : loaded.errors) std::cerr << e.to_string() << "\n";
    finish(2);
  }
  Context c{loaded.config, quarantine_settings(*loaded.config),
            f.capture.empty() ? loaded.config->capture_conninfo : f.capture,
            f.store.empty() ? loaded.config->store_conninfo : f.store};
  if (c.capture.empty()) fail(cmd, "--capture CONNINFO (or capture.conninfo in the config) is required", 2);
  return c;
}

// The database of --database, else the one the conninfo names (libpq's default if none).
std::string conninfo_for(const Context& c, const std::string& database) {
  return database.empty() ? c.capture : conninfo_with_dbname(c.capture, database);
}

std::vector<std::string> databases(const Context& c, const std::string& only) {
  if (!only.empty()) return {only};
  return connectable_databases(c.capture, "predrop-quarantine");
}

// Runs fn(database, session) on each database the command covers. A database it cannot connect to
// is skipped with a warning, unless --database named it: then that is the command's error.
void for_each_database(const Context& c, const std::string& only, const std::string& cmd, const std::string& skipped_as,
                       const std::function<void(const std::string&, PgSession&)>& fn) {
  for (const auto& dbname : databases(c, only)) {
    std::unique_ptr<PgSession> db;
    try {
      db = std::make_unique<PgSession>(conninfo_with_dbname(c.capture, dbname), "predrop-quarantine");
    } catch (const std::exception& e) {
      if (!only.empty()) throw;
      std::cerr << "predrop " << cmd << ": warning: database " << dbname << " " << skipped_as << ": " << e.what() << "\n";
      continue;
    }
    fn(dbname, *db);
  }
}

std::unique_ptr<PgSession> open_store(const std::string& cmd, const Context& c) {
  if (c.store.empty()) return nullptr;
  try {
    return std::make_unique<PgSession>(c.store, "predrop-quarantine");
  } catch (const std::exception& e) {
    std::cerr << "predrop " << cmd << ": warning: store unreachable, its rows are not updated: " << e.what() << "\n";
    return nullptr;
  }
}

std::string human_bytes(int64_t b) {
  const char* units[] = {"B", "kB", "MB", "GB", "TB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, ++u;
  return fmt(v, u == 0 ? 0 : 1) + " " + units[u];
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
  // defaults, grants: capture/quarantine_sql.cpp), as definitions to run again, on the names the tables
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
std::string purged_note(const Context& ctx, const std::string& dbname, const std::string& schema,
                        const std::string& table, const std::string& id) {
  auto store = open_store("undrop", ctx);
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
// Fails (fail()) with what was not possible; nothing is restored then.
json undrop_table(const Context& ctx, const std::string& qualified, const std::string& id, const std::string& as,
                  const std::string& database) {
  auto [schema, table] = capture::split_qualified(qualified);
  try {
    PgSession db(conninfo_for(ctx, database), "predrop-undrop");
    const std::string dbname = database_of(db);
    auto held = list_held(db, dbname, ctx.qs.schema);
    const HeldTable* pick = nullptr;
    for (const auto& h : held)
      if (str(h.detail, "schema") == schema && str(h.detail, "table") == table && (id.empty() || h.id() == id))
        pick = &h;  // oldest first: the last match is the newest
    if (!pick)
      fail("undrop", "no quarantined version of " + schema + "." + table + (id.empty() ? "" : " with id " + id) +
                         " in database " + dbname + purged_note(ctx, dbname, schema, table, id));
    std::string to_schema = schema, to_name = table;
    if (!as.empty()) {
      if (as.find('.') != std::string::npos) std::tie(to_schema, to_name) = capture::split_qualified(as);
      else to_name = as;
    }
    if (relation_exists(db, to_schema, to_name))
      fail("undrop", to_schema + "." + to_name + " exists; restore under another name with --as NAME");
    const bool renamed = to_schema != schema || to_name != table;
    const json& d = pick->detail;
    Undrop u{db, ctx.qs.schema};
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
    } catch (const CLI::Error&) {
      throw;
    } catch (const std::exception& e) {
      try {
        db.run("ROLLBACK");
      } catch (...) {
      }
      fail("undrop", std::string("nothing restored: ") + e.what());
    }
    if (auto store = open_store("undrop", ctx)) {
      try {
        store_mark(*store, *pick, ctx.qs.schema, "restored", "undrop");
      } catch (const std::exception& e) {
        std::cerr << "predrop undrop: warning: store row not updated: " << e.what() << "\n";
      }
    }
    json& r = u.report;
    r["id"] = pick->id();
    r["database"] = dbname;
    r["from"] = ctx.qs.schema + "." + pick->quarantine_table;
    r["table"] = to_schema + "." + to_name;
    r["dropped_at"] = str(d, "dropped_at");
    r["restored_from"] = schema + "." + table;
    return r;
  } catch (const CLI::Error&) {
    throw;
  } catch (const std::exception& e) {
    fail("undrop", e.what());
  }
}

void cmd_undrop(const QFlags& f) {
  auto ctx = context("undrop", f);
  json r = undrop_table(ctx, f.table, f.id, f.as, f.database);
  {
    if (f.format == "json") {
      r.erase("restored_from");
      std::cout << r.dump(2) << "\n";
    } else {
      std::cout << "restored " << str(r, "restored_from") << " (id " << str(r, "id") << ", dropped " << str(r, "dropped_at")
                << ") as " << str(r, "table") << "\n";
      for (const auto& x : r["restored"])
        std::cout << "  " << str(x, "kind") << " " << str(x, "name")
                  << (str(x, "kind") == "owner" ? ": owns it again\n" : ": original name\n");
      if (r.contains("attached_to")) std::cout << "  attached again as a partition of " << str(r, "attached_to") << "\n";
      for (const auto& x : r["dependents_recreated"])
        std::cout << "  recreated " << str(x, "kind") << " " << str(x, "schema") << "." << str(x, "name") << "\n";
      for (const auto& x : r["not_restored"])
        std::cout << "  NOT restored: " << str(x, "kind") << " " << str(x, "name") << ": " << str(x, "reason") << "\n";
    }
  }
  finish(0);
}

// ---- list / purge ----

json list_quarantine(const Context& ctx, const std::string& database) {
  json all = json::array();
  try {
    for_each_database(ctx, database, "quarantine list", "not listed", [&](const std::string& dbname, PgSession& db) {
      const int64_t now = server_now(db);
      for (const auto& h : list_held(db, dbname, ctx.qs.schema)) {
        all.push_back({{"database", dbname},
                       {"id", h.id()},
                       {"schema", str(h.detail, "schema")},
                       {"table", str(h.detail, "table")},
                       {"quarantine_table", ctx.qs.schema + "." + h.quarantine_table},
                       {"bytes", h.bytes},
                       {"dropped_at", str(h.detail, "dropped_at")},
                       {"dropped_by", str(h.detail, "dropped_by")},
                       {"age_s", now - h.dropped_at},
                       {"expires_in_s", h.dropped_at + ctx.qs.retention_s - now},
                       {"partitions", h.detail.value("members", json::array()).size()},
                       {"dependents", h.detail.value("dependents", json::array()).size()},
                       {"detached", h.detail.value("detached", json::array()).size()}});
      }
    });
  } catch (const CLI::Error&) {
    throw;
  } catch (const std::exception& e) {
    fail("quarantine list", e.what());
  }
  return all;
}

void cmd_list(const QFlags& f) {
  auto ctx = context("quarantine list", f);
  json all = list_quarantine(ctx, f.database);
  if (f.format == "json") {
    std::cout << all.dump(2) << "\n";
    finish(0);
  }
  if (all.empty()) std::cout << "nothing in quarantine\n";
  for (const auto& e : all)
    std::cout << str(e, "database") << "  " << str(e, "schema") << "." << str(e, "table") << "  " << str(e, "id") << "  "
              << human_bytes(e["bytes"].get<int64_t>()) << "  age " << human_age(e["age_s"].get<int64_t>()) << "  expires in "
              << human_age(e["expires_in_s"].get<int64_t>()) << "  (" << str(e, "quarantine_table") << ")\n";
  finish(0);
}

void cmd_purge(const QFlags& f) {
  auto ctx = context("quarantine purge", f);
  int64_t older = -1;
  if (!f.older_than.empty() && (older = parse_duration_s(f.older_than)) < 0)
    fail("quarantine purge", "--older-than wants a duration (7d, 36h, 90m, 30s or seconds), got '" + f.older_than + "'", 2);
  if (older < 0 && f.id.empty()) fail("quarantine purge", "--older-than DURATION or --id ID is required", 2);
  auto store = open_store("quarantine purge", ctx);
  int purged = 0, skipped = 0;
  try {
    for_each_database(ctx, f.database, "quarantine purge", "not reached", [&](const std::string& dbname, PgSession& db) {
      const int64_t now = server_now(db);
      for (const auto& h : list_held(db, dbname, ctx.qs.schema)) {
        if (!f.id.empty() && h.id() != f.id) continue;
        if (older >= 0 && now - h.dropped_at < older) continue;
        const std::string what = dbname + " " + str(h.detail, "schema") + "." + str(h.detail, "table") + " (id " + h.id() + ")";
        auto outcome = purge_held(db, ctx.qs.schema, h, std::max(ctx.qs.lock_timeout_ms, 1000));
        if (outcome == PurgeOutcome::lock_timeout) {
          std::cout << "skipped " << what << ": locked by another session\n";
          ++skipped;
          continue;
        }
        std::cout << "purged " << what << "\n";
        ++purged;
        if (store) {
          try {
            store_mark(*store, h, ctx.qs.schema, "purged", "manual");
          } catch (const std::exception& e) {
            std::cerr << "predrop quarantine purge: warning: store row not updated: " << e.what() << "\n";
          }
        }
      }
    });
  } catch (const CLI::Error&) {
    throw;
  } catch (const std::exception& e) {
    fail("quarantine purge", e.what());
  }
  std::cout << purged << " purged" << (skipped ? ", " + std::to_string(skipped) + " skipped (locked)" : "") << "\n";
  finish(skipped ? 3 : 0);
}

// Test-only: the SQL a quarantined DROP becomes, so tests can run it in a session of their own.
void cmd_debug_move(const QFlags& f) {
  if (f.prepare) {
    std::cout << capture::quarantine_prepare_sql(f.qschema) << "\n";
  } else if (f.catalog) {
    std::cout << capture::quarantine_catalog_sql(f.qschema) << "\n";
  } else {
    capture::QuarantineMove m;
    m.quarantine_schema = f.qschema;
    m.cascade = f.cascade;
    m.max_bytes = f.max_bytes;
    m.schemas = f.schemas;
    auto add = [&](const std::string& n, bool quarantine) {
      capture::QuarantineTarget t;
      auto dot = n.find('.');
      if (dot == std::string::npos) t.table = n;
      else t.schema = n.substr(0, dot), t.table = n.substr(dot + 1);
      t.quarantine = quarantine;
      m.tables.push_back(t);
    };
    for (const auto& n : f.names) add(n, true);
    for (const auto& n : f.real_names) add(n, false);
    std::cout << capture::quarantine_move_sql(m) << "\n";
  }
  finish(0);
}

void add_conn_options(CLI::App* sub, QFlags& f) {
  sub->add_option("--config", f.config, "YAML config file");
  sub->add_option("--capture", f.capture, "libpq conninfo of predrop's capture role (default: the config's capture.conninfo)");
  sub->add_option("--store", f.store, "libpq conninfo of the store (default: the config's store.conninfo)");
  sub->add_option("--database", f.database, "only this database (undrop: the database to restore in)");
}

}  // namespace

std::vector<std::string> connectable_databases(const std::string& capture_conninfo, const std::string& application_name) {
  PgSession db(conninfo_or_dbname(capture_conninfo, "postgres"), application_name);
  auto r = db.exec("SELECT datname FROM pg_database WHERE datallowconn AND NOT datistemplate ORDER BY datname");
  std::vector<std::string> out;
  for (int i = 0; i < r.rows(); ++i) out.push_back(r.text(i, 0));
  return out;
}

std::vector<HeldTable> list_held(PgSession& db, const std::string& database, const std::string& schema) {
  std::vector<HeldTable> out;
  if (db.exec("SELECT 1 FROM pg_namespace WHERE nspname = $1", Params{schema}).rows() == 0) return out;
  auto r = db.exec(capture::quarantine_catalog_sql(schema));
  for (int i = 0; i < r.rows(); ++i) {
    HeldTable h;
    h.database = database;
    h.quarantine_table = r.text(i, 0);
    h.oid = std::stoll(r.text(i, 1));
    h.detail = json::parse(r.text(i, 2), nullptr, false);
    if (h.detail.is_discarded() || !h.detail.is_object()) continue;
    h.bytes = r.is_null(i, 3) ? 0 : std::stoll(r.text(i, 3));
    h.dropped_at = parse_utc_seconds(str(h.detail, "dropped_at"));
    out.push_back(std::move(h));
  }
  return out;
}

PurgeOutcome purge_held(PgSession& db, const std::string& schema, const HeldTable& t, int lock_timeout_ms) {
  db.run("BEGIN");
  try {
    db.run("SET LOCAL lock_timeout = " + std::to_string(std::max(lock_timeout_ms, 1)));
    // By OID: a name the purge listed a moment ago may have been restored and reused since.
    if (db.exec("SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE c.oid = $1::bigint::oid AND n.nspname = $2 AND c.relname = $3",
                Params{std::to_string(t.oid), schema, t.quarantine_table})
            .rows() == 0) {
      db.run("ROLLBACK");
      return PurgeOutcome::gone;
    }
    // CASCADE: a foreign key between two tables quarantined together goes with the first.
    db.run("DROP TABLE " + q(schema) + "." + q(t.quarantine_table) + " CASCADE");
    db.run("COMMIT");
    return PurgeOutcome::dropped;
  } catch (const std::exception& e) {
    const std::string msg = e.what();
    try {
      db.run("ROLLBACK");
    } catch (...) {
    }
    if (msg.find("lock timeout") != std::string::npos) return PurgeOutcome::lock_timeout;
    throw;
  }
}

void store_record_held(PgSession& store, const std::string& schema, const std::vector<HeldTable>& held, int64_t retention_s) {
  const std::string sql = capture::quarantine_record_sql(kQuarantineStoreTable);
  for (const auto& h : held)
    store.exec(sql, Params{h.database, h.detail.dump(), schema, h.quarantine_table, std::to_string(h.bytes), std::nullopt,
                           std::nullopt, std::to_string(retention_s), std::nullopt, std::nullopt});
}

void store_mark(PgSession& store, const HeldTable& t, const std::string& schema, const std::string& state,
                const std::string& reason) {
  store_record_held(store, schema, {t}, 0);
  store.exec(std::string("UPDATE ") + kQuarantineStoreTable +
                 " SET state = $2, state_at = now(), state_reason = $3 WHERE id = $1::uuid AND state = 'held'",
             Params{t.id(), state, reason});
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

json quarantine_list_json(std::shared_ptr<const policy::Config> cfg, const std::string& database) {
  Context c{cfg, quarantine_settings(*cfg), cfg->capture_conninfo, cfg->store_conninfo};
  if (c.capture.empty()) fail("quarantine list", "capture.conninfo is required", 2);
  return list_quarantine(c, database);
}

json undrop_json(std::shared_ptr<const policy::Config> cfg, const std::string& table, const std::string& as, const std::string& database) {
  Context c{cfg, quarantine_settings(*cfg), cfg->capture_conninfo, cfg->store_conninfo};
  if (c.capture.empty()) fail("undrop", "capture.conninfo is required", 2);
  return undrop_table(c, table, "", as, database);
}

void register_quarantine_commands(CLI::App& app) {
  auto f = std::make_shared<QFlags>();

  auto* undrop = app.add_subcommand("undrop", "restore a quarantined table (the newest version, or --id)");
  add_conn_options(undrop, *f);
  undrop->add_option("table", f->table, "SCHEMA.TABLE as it was dropped")->required();
  undrop->add_option("--id", f->id, "the quarantined version to restore (predrop quarantine list)");
  undrop->add_option("--as", f->as, "restore as NAME (or SCHEMA.NAME): required when the name is taken");
  undrop->add_option("--format", f->format, "text or json")->check(CLI::IsMember({"text", "json"}));
  undrop->callback([f] { cmd_undrop(*f); });

  auto* quarantine = app.add_subcommand("quarantine", "what quarantined DROPs hold: list, purge");
  quarantine->require_subcommand(1);
  auto* list = quarantine->add_subcommand("list", "the quarantined tables of every database (or --database): size, age, expiry");
  add_conn_options(list, *f);
  list->add_option("--format", f->format, "text or json")->check(CLI::IsMember({"text", "json"}));
  list->callback([f] { cmd_list(*f); });
  auto* purge = quarantine->add_subcommand("purge", "drop quarantined tables for good");
  add_conn_options(purge, *f);
  purge->add_option("--older-than", f->older_than, "those dropped at least this long ago (7d, 36h, 90m, 30s)");
  purge->add_option("--id", f->id, "the one with this id");
  purge->callback([f] { cmd_purge(*f); });

  // Test-only, hidden from the help: prints the SQL of a quarantined DROP (tests/quarantine).
  auto* debug = app.add_subcommand("debug-quarantine-move", "");
  debug->group("");
  debug->add_option("names", f->names, "[SCHEMA.]TABLE to quarantine");
  debug->add_option("--drop-for-real", f->real_names, "[SCHEMA.]TABLE a rule does not quarantine");
  debug->add_option("--schema-drop", f->schemas, "DROP SCHEMA of this schema");
  debug->add_option("--quarantine-schema", f->qschema, "quarantine schema");
  debug->add_option("--max-bytes", f->max_bytes, "quarantine.max_bytes");
  debug->add_flag("--cascade", f->cascade, "the DROP has CASCADE");
  debug->add_flag("--prepare", f->prepare, "print quarantine_prepare_sql instead");
  debug->add_flag("--catalog", f->catalog, "print quarantine_catalog_sql instead");
  debug->callback([f] { cmd_debug_move(*f); });
}

}  // namespace predrop::cli
