// Process-wide counters. Label values are bounded enums: never a table name.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "capture/capture.hpp"
#include "capture/outcome.hpp"
#include "capture/target.hpp"

namespace predrop::proxy {

// A Prometheus histogram with fixed buckets, lock-free observe.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double seconds);
  // HELP, TYPE and the one series of an unlabelled histogram.
  std::string render(const std::string& name, const std::string& help) const;
  // One series of a family (labels `phase="catalog"`), without HELP and TYPE.
  std::string render_series(const std::string& name, const std::string& labels) const;

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;
  std::atomic<uint64_t> count_{0};
  std::atomic<uint64_t> sum_micros_{0};
};

using capture::SnapshotOutcome;
// predrop_snapshots_total's outcomes, in the order it lists them. An unresolved or unparsed
// statement is no snapshot attempt: predrop_unresolved_statements_total and
// predrop_unparsed_statements_total count them.
inline constexpr std::array<SnapshotOutcome, 8> kSnapshotMetricOutcomes{
    SnapshotOutcome::written,     SnapshotOutcome::table_missing, SnapshotOutcome::timeout,
    SnapshotOutcome::capture_error, SnapshotOutcome::store_error,   SnapshotOutcome::policy_skip,
    SnapshotOutcome::disabled,    SnapshotOutcome::deduplicated};

// A phase is a round trip or a wait, from a tenth of a millisecond.
inline Histogram capture_phase_histogram() {
  return Histogram({0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5});
}

struct Metrics {
  std::atomic<int64_t> client_connections{0};
  std::atomic<int64_t> server_connections{0};
  std::atomic<uint64_t> client_connections_total{0};
  std::atomic<uint64_t> client_connections_rejected{0};
  std::atomic<uint64_t> protocol_errors{0};           // in a session: bad lengths, malformed messages
  std::atomic<uint64_t> protocol_errors_startup{0};   // before it: bad startups, refused negotiations
  std::atomic<uint64_t> uninspected_large_statements{0};
  std::atomic<uint64_t> rejected_statements{0};
  std::atomic<uint64_t> unresolved_statements{0};
  std::atomic<uint64_t> unparsed_statements{0};
  // Tables of committed shape changes sent for an after (proxy/after.cpp).
  std::atomic<uint64_t> afters_requested{0};
  std::atomic<uint64_t> cancel_requests{0};
  std::atomic<uint64_t> copy_batched_in{0};    // COPY data phases read in batches, client → server
  std::atomic<uint64_t> copy_batched_out{0};   // and server → client
  std::array<std::atomic<uint64_t>, 8> intercepted_by_kind{};   // parser::DestroyKind order
  std::array<std::atomic<uint64_t>, capture::kSnapshotOutcomeCount> snapshots{};   // by SnapshotOutcome
  std::atomic<uint64_t> protocol_desync{0};   // server replies that matched nothing the decoder saw owed
  std::array<std::atomic<uint64_t>, 5> hold_endings{};   // by HoldEnding
  // Quarantine (quarantine/substitute.hpp): statements substituted, and those whose substitute could not
  // keep its tables (or that could not be substituted) and ran as sent.
  std::atomic<uint64_t> quarantine_substitutions{0};
  std::atomic<uint64_t> quarantine_fallbacks{0};
  // Quarantined tables purged so that a later statement answers as direct, by that statement's kind
  // (capture::YieldKind order), and yields whose purge failed (the statement went on).
  std::array<std::atomic<uint64_t>, capture::kYieldKindCount> quarantine_yielded{};
  std::atomic<uint64_t> quarantine_yield_failures{0};
  std::atomic<uint64_t> reloads_ok{0};
  std::atomic<uint64_t> reloads_failed{0};
  Histogram hold_duration{{0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5}};
  Histogram capture_duration{{0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5}};
  // predrop_capture_phase_seconds, one series per capture::CapturePhase: where capture_duration went.
  std::array<Histogram, capture::kCapturePhaseNames.size()> capture_phase{capture_phase_histogram(), capture_phase_histogram(),
                                         capture_phase_histogram(), capture_phase_histogram()};

  void count_snapshot(SnapshotOutcome o) { snapshots[static_cast<size_t>(o)].fetch_add(1, std::memory_order_relaxed); }
};

Metrics& metrics();

// The counters the relay bumps for every message, one set per thread: shared atomics would
// bounce one cache line between the event-loop threads on every message. Only the owning
// thread writes its set (a plain load+store, no locked instruction); readers sum them all.
struct alignas(64) RelayCounters {
  std::atomic<uint64_t> bytes_client_to_server{0};
  std::atomic<uint64_t> bytes_server_to_client{0};
  std::atomic<uint64_t> frontend_messages{0};
  std::atomic<uint64_t> backend_messages{0};

  void add_bytes(bool server_to_client, uint64_t n) { bump(server_to_client ? bytes_server_to_client : bytes_client_to_server, n); }
  void add_messages(bool backend, uint64_t n) { bump(backend ? backend_messages : frontend_messages, n); }
  void add_message(bool backend) { add_messages(backend, 1); }

 private:
  static void bump(std::atomic<uint64_t>& c, uint64_t n) {
    c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
};
// This thread's set.
RelayCounters& relay_counters();
struct RelayTotals {
  uint64_t bytes_client_to_server = 0, bytes_server_to_client = 0, frontend_messages = 0, backend_messages = 0;
};
RelayTotals relay_totals();

}  // namespace predrop::proxy
