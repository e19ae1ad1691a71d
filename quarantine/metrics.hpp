// The quarantine purger's figures (quarantine/purger.cpp), for the admin endpoint's /metrics:
// gauges from its last scan, counters of what it purged, and the store's count of undrops (an
// undrop runs in `predrop undrop`, another process, so the store is where serve learns of it).
// Header-only: the purger sets these and proxy/admin.cpp renders them, without either linking
// the other.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace predrop::quarantine {

struct QuarantineMetrics {
  std::atomic<bool> scanned{false};  // no gauge before the first scan: an unknown is not a zero
  std::atomic<int64_t> tables{0};
  std::atomic<int64_t> bytes{0};
  std::atomic<int64_t> largest_database_bytes{0};  // the caps are per database
  std::atomic<uint64_t> max_bytes{0};  // quarantine.max_bytes of that scan; 0 = no cap, no gauge
  std::atomic<uint64_t> purged_expired{0};
  std::atomic<uint64_t> purged_cap{0};
  std::atomic<int64_t> undrops{-1};  // -1: the store was not read
};

inline QuarantineMetrics& metrics() {
  static QuarantineMetrics m;
  return m;
}

inline void render_metrics(std::string& out) {
  auto& m = metrics();
  if (m.scanned.load()) {
    out += "# HELP predrop_quarantine_tables Quarantined tables held, all databases, at the purger's last scan.\n"
           "# TYPE predrop_quarantine_tables gauge\npredrop_quarantine_tables " + std::to_string(m.tables.load()) + "\n";
    out += "# HELP predrop_quarantine_bytes Bytes of the quarantined tables (with indexes and TOAST) at the purger's last scan.\n"
           "# TYPE predrop_quarantine_bytes gauge\npredrop_quarantine_bytes " + std::to_string(m.bytes.load()) + "\n";
    out += "# HELP predrop_quarantine_database_bytes_max Bytes quarantined in the database holding the most (the caps are per database).\n"
           "# TYPE predrop_quarantine_database_bytes_max gauge\npredrop_quarantine_database_bytes_max " +
           std::to_string(m.largest_database_bytes.load()) + "\n";
    if (m.max_bytes.load() > 0)
      out += "# HELP predrop_quarantine_max_bytes quarantine.max_bytes, the byte cap the purger enforces in each database.\n"
             "# TYPE predrop_quarantine_max_bytes gauge\npredrop_quarantine_max_bytes " + std::to_string(m.max_bytes.load()) + "\n";
  }
  out += "# HELP predrop_quarantine_purged_total Quarantined tables this process's purger dropped, by reason.\n"
         "# TYPE predrop_quarantine_purged_total counter\n"
         "predrop_quarantine_purged_total{reason=\"expired\"} " + std::to_string(m.purged_expired.load()) + "\n"
         "predrop_quarantine_purged_total{reason=\"cap\"} " + std::to_string(m.purged_cap.load()) + "\n";
  if (m.undrops.load() >= 0)
    out += "# HELP predrop_undrops_total Quarantined tables restored by predrop undrop (the store's restored rows).\n"
           "# TYPE predrop_undrops_total counter\npredrop_undrops_total " + std::to_string(m.undrops.load()) + "\n";
}

}  // namespace predrop::quarantine
