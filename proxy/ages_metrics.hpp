// The staleness distribution for /metrics (issue 25; plan 026, phase A: "a metric for the
// staleness distribution"): the histogram text cli/ages_metric.cpp renders from the store every
// metrics.ages_interval_s, kept whole so that a scrape only copies it and never reads the store.
// Header-only: the reader lives outside proxy/ and sets it; admin.cpp renders it.
#pragma once

#include <memory>
#include <mutex>
#include <string>

namespace predrop::proxy {

struct TableAgeMetrics {
  std::mutex m;
  std::shared_ptr<const std::string> rendered;   // null until the store was read once
};

inline TableAgeMetrics& table_age_metrics() {
  static TableAgeMetrics t;
  return t;
}

inline void set_table_age_metrics(std::string rendered) {
  auto text = std::make_shared<const std::string>(std::move(rendered));
  auto& t = table_age_metrics();
  std::lock_guard lock(t.m);
  t.rendered = std::move(text);
}

inline void render_table_age_metrics(std::string& out) {
  std::shared_ptr<const std::string> text;
  {
    auto& t = table_age_metrics();
    std::lock_guard lock(t.m);
    text = t.rendered;
  }
  if (text) out += *text;
}

}  // namespace predrop::proxy
