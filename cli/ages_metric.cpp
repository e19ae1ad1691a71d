#include "cli/ages_metric.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "proxy/background_metrics.hpp"

namespace predrop::cli {

namespace {

std::string label_value(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

}  // namespace

std::string render_table_ages(const std::vector<evidence::AgeHistogram>& histograms) {
  const std::string name = "predrop_table_version_age_seconds";
  std::string out = "# HELP " + name +
                    " Age of each table's current version (its newest post_create, else its first sighting), per "
                    "database and schema, read from the store every metrics.ages_interval_s.\n# TYPE " + name +
                    " histogram\n";
  for (const auto& h : histograms) {
    const std::string labels = "database=\"" + label_value(h.database) + "\",schema=\"" + label_value(h.schema) + "\"";
    for (size_t i = 0; i < kTableAgeBounds.size() && i < h.cumulative.size(); ++i)
      out += name + "_bucket{" + labels + ",le=\"" + std::to_string(kTableAgeBounds[i]) + "\"} " +
             std::to_string(h.cumulative[i]) + "\n";
    out += name + "_bucket{" + labels + ",le=\"+Inf\"} " + std::to_string(h.count) + "\n";
    out += name + "_sum{" + labels + "} " + std::to_string(h.sum_s) + "\n";
    out += name + "_count{" + labels + "} " + std::to_string(h.count) + "\n";
  }
  return out;
}

std::unique_ptr<PeriodicTask> start_ages_metric(std::shared_ptr<const policy::Config> config) {
  if (config->metrics_ages_interval_s <= 0 || config->store_conninfo.empty()) return nullptr;
  const std::chrono::milliseconds period = std::chrono::seconds(config->metrics_ages_interval_s);
  // The first read waits a little: serve migrates the store as it starts, and a sidecar that only
  // starts and stops never reads at all.
  return std::make_unique<PeriodicTask>(
      std::min<std::chrono::milliseconds>(period, std::chrono::seconds(5)), period,
      "the table ages' read from the store (predrop_table_version_age_seconds keeps its last values)",
      [cfg = std::move(config)](spdlog::logger&) {
        // Read-only, and never queued for long behind a lock on the store (stop() joins this thread).
        evidence::PgSession store(cfg->store_conninfo, "predrop-ages",
                                  "-c default_transaction_read_only=on -c lock_timeout=1000 -c statement_timeout=60000");
        proxy::set_background_metrics(
            "ages", render_table_ages(evidence::age_histograms(store, cfg->store_table, kTableAgeBounds)));
      });
}

}  // namespace predrop::cli
