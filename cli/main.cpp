// The entry point: one small file that wires the rooms together per subcommand.
#include <CLI/CLI.hpp>
#include <cstdlib>
#include <iostream>

#include "capture/capture.hpp"
#include "cli/ages_metric.hpp"
#include "cli/store_pruner.hpp"
#include "cli/baseline_schedule.hpp"
#include "cli/evidence.hpp"
#include "cli/console_commands.hpp"
#include "cli/quarantine.hpp"
#include "quarantine/purger.hpp"
#include "policy/policy.hpp"
#include "proxy/server.hpp"

namespace {

using predrop::policy::Config;

struct ServeFlags {
  std::string config_path, listen, upstream, capture, store, admin;
  int hold_timeout_ms = -1;
  bool no_migrate = false;
};

std::shared_ptr<const Config> load_or_exit(const std::string& path) {
  auto result = path.empty() ? predrop::policy::load_defaults() : predrop::policy::load_file(path);
  if (!result.errors.empty()) {
    for (const auto& e : result.errors) std::cerr << e.to_string() << "\n";
    std::exit(2);
  }
  return result.config;
}

predrop::policy::Endpoint endpoint_or_exit(const std::string& flag, const std::string& value) {
  auto ep = predrop::policy::parse_endpoint(value);
  if (!ep) {
    std::cerr << "predrop: " << flag << " wants HOST:PORT, got '" << value << "'\n";
    std::exit(2);
  }
  return *ep;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"predrop: a PostgreSQL wire-protocol proxy that snapshots a table's shape before it is destroyed"};
  app.set_version_flag("--version", std::string("predrop ") + PREDROP_VERSION);
  app.require_subcommand(1);

  ServeFlags sf;
  auto* serve = app.add_subcommand("serve", "relay clients to PostgreSQL, holding destructive statements until snapshotted");
  serve->add_option("--config", sf.config_path, "YAML config file");
  serve->add_option("--listen", sf.listen, "HOST:PORT to accept clients on");
  serve->add_option("--upstream", sf.upstream, "HOST:PORT of PostgreSQL");
  serve->add_option("--capture", sf.capture, "libpq conninfo for capture connections (no dbname)");
  serve->add_option("--store", sf.store, "libpq conninfo of the snapshot store");
  serve->add_option("--admin", sf.admin, "HOST:PORT of the admin endpoint (metrics, health); PORT alone binds 127.0.0.1");
  serve->add_option("--hold-timeout-ms", sf.hold_timeout_ms, "longest a destructive statement is held");
  serve->add_flag("--no-migrate", sf.no_migrate, "do not apply pending store migrations at start");

  std::string check_path;
  auto* check = app.add_subcommand("check-config", "validate a config file and print it with secrets masked");
  check->add_option("file", check_path, "YAML config file")->required();

  std::string migrate_store, migrate_config;
  auto* migrate = app.add_subcommand("migrate", "apply the store's pending migrations");
  migrate->add_option("--store", migrate_store, "libpq conninfo of the snapshot store");
  migrate->add_option("--config", migrate_config, "YAML config file");

  predrop::cli::register_evidence_commands(app);
  predrop::cli::register_quarantine_commands(app);

  CLI11_PARSE(app, argc, argv);

  if (*check) {
    auto result = predrop::policy::load_file(check_path);
    if (!result.errors.empty()) {
      for (const auto& e : result.errors) std::cerr << e.to_string() << "\n";
      return 1;
    }
    std::cout << predrop::policy::describe(*result.config);
    return 0;
  }

  if (*migrate) {
    auto cfg = load_or_exit(migrate_config);
    std::string store = migrate_store.empty() ? cfg->store_conninfo : migrate_store;
    if (store.empty()) {
      std::cerr << "predrop migrate: --store CONNINFO (or store.conninfo in the config) is required\n";
      return 2;
    }
    auto r = predrop::capture::migrate(store, cfg->store_table);
    if (!r.ok) {
      std::cerr << "predrop migrate: " << r.error << "\n";
      return 1;
    }
    std::cout << "store at version " << r.to_version << " (was " << r.from_version << ")\n";
    return 0;
  }

  auto base = load_or_exit(sf.config_path);
  if (sf.hold_timeout_ms == 0 || sf.hold_timeout_ms > 3600000) {
    std::cerr << "predrop: --hold-timeout-ms must be between 1 and 3600000\n";
    return 2;
  }
  // Flags beat the file, now and after every SIGHUP reload.
  predrop::proxy::ConfigOverrides flags = [sf](Config& c) {
    if (!sf.listen.empty()) c.listen = endpoint_or_exit("--listen", sf.listen);
    if (!sf.upstream.empty()) c.upstream = endpoint_or_exit("--upstream", sf.upstream);
    if (!sf.admin.empty()) {
      auto ep = predrop::policy::parse_admin_endpoint(sf.admin);
      if (!ep) {
        std::cerr << "predrop: --admin wants HOST:PORT or PORT (127.0.0.1:PORT), got '" << sf.admin << "'\n";
        std::exit(2);
      }
      c.admin = *ep;
    }
    if (!sf.capture.empty()) c.capture_conninfo = sf.capture;
    if (!sf.store.empty()) c.store_conninfo = sf.store;
    if (sf.hold_timeout_ms > 0) c.hold_timeout_ms = sf.hold_timeout_ms;
    if (sf.no_migrate) c.migrate_on_start = false;
  };
  auto cfg = std::make_shared<Config>(*base);
  flags(*cfg);
  auto baseline = predrop::cli::start_baseline_schedule(cfg, sf.config_path, flags);
  predrop::quarantine::Purger purger(cfg, sf.config_path, flags);
  auto ages = predrop::cli::start_ages_metric(cfg);
  auto pruner = predrop::cli::start_store_pruner(cfg);
  int rc = predrop::proxy::serve(cfg, sf.config_path, flags, predrop::cli::console_commands());
  if (pruner) pruner->stop();
  if (ages) ages->stop();
  purger.stop();
  baseline->stop();
  return rc;
}
