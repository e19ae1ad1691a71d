// /metrics text that threads outside the relay compute on their own schedule and keep whole, so
// that a scrape only copies it and never reads the store: the staleness distribution of
// cli/ages_metric.cpp (issue 25, plan 026 phase A) and the store retention's figures of
// cli/store_pruner.cpp. Header-only: the writers live outside proxy/ and set their part by name;
// admin.cpp renders every part, in name order.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace predrop::proxy {

struct BackgroundMetrics {
  std::mutex m;
  std::map<std::string, std::shared_ptr<const std::string>> rendered;   // absent until first set
};

inline BackgroundMetrics& background_metrics() {
  static BackgroundMetrics b;
  return b;
}

inline void set_background_metrics(const std::string& part, std::string rendered) {
  auto text = std::make_shared<const std::string>(std::move(rendered));
  auto& b = background_metrics();
  std::lock_guard lock(b.m);
  b.rendered[part] = std::move(text);
}

inline void render_background_metrics(std::string& out) {
  std::map<std::string, std::shared_ptr<const std::string>> parts;
  {
    auto& b = background_metrics();
    std::lock_guard lock(b.m);
    parts = b.rendered;
  }
  for (const auto& [part, text] : parts) out += *text;
}

}  // namespace predrop::proxy
