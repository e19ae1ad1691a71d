#include "proxy/metrics.hpp"

#include <cstdio>
#include <deque>

namespace predrop::proxy {

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), buckets_(new std::atomic<uint64_t>[bounds_.size()]) {
  for (size_t i = 0; i < bounds_.size(); ++i) buckets_[i] = 0;
}

void Histogram::observe(double seconds) {
  for (size_t i = 0; i < bounds_.size(); ++i)
    if (seconds <= bounds_[i]) buckets_[i].fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  sum_micros_.fetch_add(static_cast<uint64_t>(seconds * 1e6), std::memory_order_relaxed);
}

std::string Histogram::render(const std::string& name, const std::string& help) const {
  return "# HELP " + name + " " + help + "\n# TYPE " + name + " histogram\n" + render_series(name, "");
}

std::string Histogram::render_series(const std::string& name, const std::string& labels) const {
  std::string out;
  const std::string le_prefix = labels.empty() ? "" : labels + ",";
  const std::string own = labels.empty() ? "" : "{" + labels + "}";
  char line[512];
  for (size_t i = 0; i < bounds_.size(); ++i) {
    std::snprintf(line, sizeof line, "%s_bucket{%sle=\"%g\"} %llu\n", name.c_str(), le_prefix.c_str(), bounds_[i],
                  static_cast<unsigned long long>(buckets_[i].load()));
    out += line;
  }
  std::snprintf(line, sizeof line, "%s_bucket{%sle=\"+Inf\"} %llu\n%s_sum%s %.6f\n%s_count%s %llu\n", name.c_str(),
                le_prefix.c_str(), static_cast<unsigned long long>(count_.load()), name.c_str(), own.c_str(),
                sum_micros_.load() / 1e6, name.c_str(), own.c_str(), static_cast<unsigned long long>(count_.load()));
  out += line;
  return out;
}

Metrics& metrics() {
  static Metrics m;
  return m;
}

namespace {
std::mutex relay_counters_mu;
// Never shrinks: a set outlives its thread so that the totals stay monotonic.
std::deque<RelayCounters>& relay_counter_sets() {
  static auto* sets = new std::deque<RelayCounters>();
  return *sets;
}
}  // namespace

RelayCounters& relay_counters() {
  thread_local RelayCounters* mine = [] {
    std::lock_guard lk(relay_counters_mu);
    return &relay_counter_sets().emplace_back();
  }();
  return *mine;
}

RelayTotals relay_totals() {
  RelayTotals t;
  std::lock_guard lk(relay_counters_mu);
  for (const auto& c : relay_counter_sets()) {
    t.bytes_client_to_server += c.bytes_client_to_server.load(std::memory_order_relaxed);
    t.bytes_server_to_client += c.bytes_server_to_client.load(std::memory_order_relaxed);
    t.frontend_messages += c.frontend_messages.load(std::memory_order_relaxed);
    t.backend_messages += c.backend_messages.load(std::memory_order_relaxed);
  }
  return t;
}

}  // namespace predrop::proxy
