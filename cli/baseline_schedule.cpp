#include "cli/baseline_schedule.hpp"

#include <algorithm>
#include <chrono>

#include "evidence/baseline.hpp"

namespace predrop::cli {

namespace {

void run_pass(FleetSchedule& fs, spdlog::logger& log, const policy::Config& cfg, const std::string& store,
              const std::string& db, int64_t round) {
  evidence::BaselineOptions o;
  o.target_conninfo = conninfo_with_dbname(cfg.capture_conninfo, db);
  o.store_conninfo = store;
  o.store_table = cfg.store_table;
  o.batch_size = cfg.baseline_batch_size;
  o.lanes = cfg.baseline_lanes;
  o.bounds = {cfg.profile_max_values, cfg.profile_max_value_chars, cfg.profile_max_columns};
  o.naive_array_split = cfg.naive_array_split;
  o.hash_excluded = cfg.hash_excluded;
  o.enrich_identity_sql = cfg.enrich_identity_sql;
  o.enrich_provenance_sql = cfg.enrich_provenance_sql;
  o.actor = "predrop serve baseline";
  // The tables a DROP TABLE would be snapshotted for (a quarantine snapshots too), less baseline.exclude.
  o.include = [&cfg](const std::string& d, const std::string& schema, const std::string& table) {
    return !cfg.baseline_excludes(schema, table) && cfg.decide(d, schema, table, policy::DestroyKind::drop_table).action != policy::Action::skip;
  };
  o.cancelled = [&fs] { return fs.stopping(); };
  try {
    auto r = evidence::run_baseline(o);
    log.info("baseline of {}: {} tables, {} candidates, {} captured, {} skipped, {:.2f} s, round {}{}", r.database,
             r.tables, r.candidates, r.captured, r.skipped, r.seconds, round,
             r.interrupted ? " (interrupted by shutdown)" : "");
    for (const auto& e : r.errors) log.warn("baseline of {}: batch failed: {}", r.database, e);
  } catch (const std::exception& e) {
    log.warn("baseline of {} failed: {}", db, e.what());
  }
}

void run_round(FleetSchedule& fs, spdlog::logger& log, const std::shared_ptr<const policy::Config>& cfg,
               const FleetSchedule::Round& round) {
  const std::string store = store_conninfo_of(*cfg);
  if (cfg->capture_conninfo.empty() || store.empty()) {
    log.warn("baseline.interval_s is set but there is no capture.conninfo (--capture): no baseline this round");
    return;
  }
  RoundLock lock(store, "predrop-baseline-lock", kBaselineLockClass, cfg->store_table);
  if (!lock.try_lock()) {
    log.debug("baseline: another predrop holds the baseline lock; skipping this round");
    return;
  }
  if (!lock.claim_round("baseline", cfg->store_table, round.epoch_s, log)) {
    log.debug("baseline: another predrop walked this round already; skipping it");
    return;
  }
  for (const auto& db : cfg->baseline_databases) {
    if (fs.stopping()) break;
    run_pass(fs, log, *cfg, store, db, round.epoch_s);
  }
  // Held to the middle of the round (at most a minute): a sidecar whose timer fires a little
  // late finds the lock still taken instead of walking the catalog a second time.
  auto hold = std::min<FleetSchedule::Clock::duration>(std::chrono::seconds(cfg->baseline_interval_s) / 2, std::chrono::seconds(60));
  fs.wait_until(round.start + hold);
}

}  // namespace

std::unique_ptr<FleetSchedule> start_baseline_schedule(std::shared_ptr<const policy::Config> config, std::string config_path,
                                                       FleetSchedule::Overrides overrides) {
  FleetSchedule::Task task;
  task.name = "baseline";
  task.interval_s = [](const policy::Config& c) { return c.baseline_interval_s; };
  task.run = run_round;
  return std::make_unique<FleetSchedule>(std::move(config), std::move(config_path), std::move(overrides), std::move(task));
}

}  // namespace predrop::cli
