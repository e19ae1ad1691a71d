#include "cli/ages_metric.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "proxy/ages_metrics.hpp"

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

AgesMetric::AgesMetric(std::shared_ptr<const policy::Config> config) : cfg_(std::move(config)) {
  if (cfg_->metrics_ages_interval_s > 0 && !cfg_->store_conninfo.empty()) thread_ = std::thread([this] { run(); });
}

AgesMetric::~AgesMetric() { stop(); }

void AgesMetric::stop() {
  {
    std::lock_guard lock(m_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool AgesMetric::stopped_within(std::chrono::milliseconds wait) {
  std::unique_lock lock(m_);
  return cv_.wait_for(lock, wait, [this] { return stop_; });
}

void AgesMetric::run() {
  const std::chrono::milliseconds period = std::chrono::seconds(cfg_->metrics_ages_interval_s);
  // serve names its logger once it starts; what this thread says goes there.
  while (!spdlog::get("predrop"))
    if (stopped_within(std::chrono::milliseconds(20))) return;
  auto log = spdlog::get("predrop");
  // The first read waits a little: serve migrates the store as it starts, and a sidecar that only
  // starts and stops never reads at all.
  if (stopped_within(std::min<std::chrono::milliseconds>(period, std::chrono::seconds(5)))) return;
  bool warned = false;
  do {
    try {
      // Read-only, and never queued for long behind a lock on the store (stop() joins this thread).
      evidence::PgSession store(cfg_->store_conninfo, "predrop-ages",
                                "-c default_transaction_read_only=on -c lock_timeout=1000 -c statement_timeout=60000");
      proxy::set_table_age_metrics(render_table_ages(evidence::age_histograms(store, cfg_->store_table, kTableAgeBounds)));
      if (warned) log->info("table ages read from the store again");
      warned = false;
    } catch (const std::exception& e) {
      if (!warned)
        log->warn("table ages not read from the store (predrop_table_version_age_seconds keeps its last values): {}",
                  e.what());
      warned = true;
    }
  } while (!stopped_within(period));
}

}  // namespace predrop::cli
