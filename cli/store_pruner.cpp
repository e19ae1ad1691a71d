#include "cli/store_pruner.hpp"

#include <algorithm>
#include <chrono>
#include <string>

#include "evidence/retention.hpp"
#include "policy/value_text.hpp"
#include "proxy/background_metrics.hpp"

namespace predrop::cli {

namespace {

std::string render(int64_t pruned_total, int64_t snapshots) {
  return "# HELP predrop_store_pruned_total Snapshots deleted by store.retention since start.\n"
         "# TYPE predrop_store_pruned_total counter\npredrop_store_pruned_total " + std::to_string(pruned_total) +
         "\n# HELP predrop_store_snapshots Snapshots in the store after the last pruning run.\n"
         "# TYPE predrop_store_snapshots gauge\npredrop_store_snapshots " + std::to_string(snapshots) + "\n";
}

}  // namespace

std::unique_ptr<PeriodicTask> start_store_pruner(std::shared_ptr<const policy::Config> config) {
  if (config->store_retention_s <= 0 || config->store_conninfo.empty()) return nullptr;
  proxy::set_background_metrics("store", render(0, 0));
  const std::chrono::milliseconds period = std::chrono::seconds(config->store_prune_interval_s);
  // As the ages' read: not before serve has migrated the store.
  return std::make_unique<PeriodicTask>(
      std::min<std::chrono::milliseconds>(period, std::chrono::seconds(5)), period, "the store's pruning (store.retention)",
      [cfg = std::move(config), total = int64_t{0}](spdlog::logger& log) mutable {
        evidence::PgSession store(cfg->store_conninfo, "predrop-prune", "-c statement_timeout=600000");
        evidence::PruneOptions o;
        o.retention_s = cfg->store_retention_s;
        const auto c = evidence::prune_store(store, cfg->store_table, o);
        if (c.locked_out) {
          log.debug("store: another predrop is pruning; skipping this round");
          return;
        }
        total += c.pruned;
        proxy::set_background_metrics("store", render(total, c.snapshots - c.pruned));
        if (c.pruned > 0 || c.prunable > 0)
          log.info("store: pruned {} of {} snapshots older than {} ({} kept: newest pairs, first shapes, newest, "
                   "quarantines)", c.pruned, c.older, policy::detail::format_duration_s(cfg->store_retention_s),
                   c.older - c.prunable);
      });
}

}  // namespace predrop::cli
