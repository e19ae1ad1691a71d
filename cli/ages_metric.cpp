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

std::string render_ages_reads(const evidence::SharedAges& last, int64_t computed, int64_t shared) {
  return "# HELP predrop_table_version_age_computed_timestamp_seconds When the table ages above were computed, by "
         "this serve or by another on the same store (Unix seconds, the store's clock).\n"
         "# TYPE predrop_table_version_age_computed_timestamp_seconds gauge\n"
         "predrop_table_version_age_computed_timestamp_seconds " + std::to_string(static_cast<int64_t>(last.computed_at)) +
         "\n# HELP predrop_table_ages_reads_total Reads of the table ages from the store: computed here, or shared "
         "(another serve's, from predrop.table_ages).\n# TYPE predrop_table_ages_reads_total counter\n"
         "predrop_table_ages_reads_total{source=\"computed\"} " + std::to_string(computed) +
         "\npredrop_table_ages_reads_total{source=\"shared\"} " + std::to_string(shared) + "\n";
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
      [cfg = std::move(config), period, computed = int64_t{0}, shared = int64_t{0}](spdlog::logger&) mutable {
        // Never queued for long behind a lock on the store (stop() joins this thread).
        evidence::PgSession store(cfg->store_conninfo, "predrop-ages", "-c lock_timeout=1000 -c statement_timeout=60000");
        // Fresh for half a period: what a serve shows is at most one and a half periods old, and a
        // fleet computes the ages one to two times a period between all its serves, not once a serve.
        const auto ages = evidence::shared_age_histograms(store, cfg->store_table, kTableAgeBounds, period.count() / 2);
        ++(ages.computed ? computed : shared);
        proxy::set_background_metrics("ages", render_table_ages(ages.histograms) + render_ages_reads(ages, computed, shared));
      });
}

}  // namespace predrop::cli
