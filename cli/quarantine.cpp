#include "cli/quarantine.hpp"

#include <iostream>

#include "cli/evidence_support.hpp"
#include "quarantine/held.hpp"

namespace predrop::cli {

using nlohmann::json;

namespace {

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

// The config's quarantine settings and conninfos, with --capture and --store over them.
quarantine::Reach reach(const std::string& cmd, const QFlags& f) {
  auto loaded = f.config.empty() ? policy::load_defaults() : policy::load_file(f.config);
  if (!loaded.errors.empty()) {
    for (const auto& e : loaded.errors) std::cerr << e.to_string() << "\n";
    finish(2);
  }
  quarantine::Reach r{quarantine::settings_of(*loaded.config), f.capture.empty() ? loaded.config->capture_conninfo : f.capture,
                      f.store.empty() ? loaded.config->store_conninfo : f.store};
  if (r.capture.empty()) fail(cmd, "--capture CONNINFO (or capture.conninfo in the config) is required", 2);
  return r;
}

// Warnings go to stderr after the command's name; they do not fail it.
quarantine::Warn warn_for(const std::string& cmd) {
  return [cmd](const std::string& line) { std::cerr << "predrop " << cmd << ": warning: " << line << "\n"; };
}

std::string human_bytes(int64_t b) {
  const char* units[] = {"B", "kB", "MB", "GB", "TB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, ++u;
  return fmt(v, u == 0 ? 0 : 1) + " " + units[u];
}

void cmd_undrop(const QFlags& f) {
  auto where = reach("undrop", f);
  json r;
  try {
    r = quarantine::undrop(where, f.table, f.id, f.as, f.database, warn_for("undrop"));
  } catch (const quarantine::Error& e) {
    fail("undrop", e.what());
  }
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
  finish(0);
}

void cmd_list(const QFlags& f) {
  auto where = reach("quarantine list", f);
  json all;
  try {
    all = quarantine::list(where, f.database, warn_for("quarantine list"));
  } catch (const quarantine::Error& e) {
    fail("quarantine list", e.what());
  }
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
  auto where = reach("quarantine purge", f);
  quarantine::PurgeRequest request{f.database, f.id, -1};
  if (!f.older_than.empty() && (request.older_than_s = quarantine::parse_duration_s(f.older_than)) < 0)
    fail("quarantine purge", "--older-than wants a duration (7d, 36h, 90m, 30s or seconds), got '" + f.older_than + "'", 2);
  if (request.older_than_s < 0 && f.id.empty()) fail("quarantine purge", "--older-than DURATION or --id ID is required", 2);
  quarantine::PurgeCount n;
  try {
    n = quarantine::purge(
        where, request,
        [](const std::string& what, quarantine::PurgeOutcome outcome) {
          if (outcome == quarantine::PurgeOutcome::lock_timeout) std::cout << "skipped " << what << ": locked by another session\n";
          else std::cout << "purged " << what << "\n";
        },
        warn_for("quarantine purge"));
  } catch (const quarantine::Error& e) {
    fail("quarantine purge", e.what());
  }
  std::cout << n.purged << " purged" << (n.skipped ? ", " + std::to_string(n.skipped) + " skipped (locked)" : "") << "\n";
  finish(n.skipped ? 3 : 0);
}

// Test-only: the SQL a quarantined DROP becomes, so tests can run it in a session of their own.
void cmd_debug_move(const QFlags& f) {
  if (f.prepare) {
    std::cout << quarantine::prepare_sql(f.qschema) << "\n";
  } else if (f.catalog) {
    std::cout << quarantine::catalog_sql(f.qschema) << "\n";
  } else {
    quarantine::QuarantineMove m;
    m.quarantine_schema = f.qschema;
    m.cascade = f.cascade;
    m.max_bytes = f.max_bytes;
    m.schemas = f.schemas;
    auto add = [&](const std::string& n, bool quarantine) {
      quarantine::QuarantineTarget t;
      auto dot = n.find('.');
      if (dot == std::string::npos) t.table = n;
      else t.schema = n.substr(0, dot), t.table = n.substr(dot + 1);
      t.quarantine = quarantine;
      m.tables.push_back(t);
    };
    for (const auto& n : f.names) add(n, true);
    for (const auto& n : f.real_names) add(n, false);
    std::cout << quarantine::move_sql(m) << "\n";
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
  debug->add_flag("--prepare", f->prepare, "print prepare_sql instead");
  debug->add_flag("--catalog", f->catalog, "print catalog_sql instead");
  debug->callback([f] { cmd_debug_move(*f); });
}

}  // namespace predrop::cli
