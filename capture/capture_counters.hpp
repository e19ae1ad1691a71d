// The CaptureService's counters: written on its event-loop thread (or a caller's), read by
// stats() from any thread.
#pragma once

#include <atomic>
#include <cstdint>

#include "capture/conn_pool.hpp"

namespace predrop::capture {

struct CaptureCounters {
  std::atomic<uint64_t> catalog{0}, enrich{0}, store{0}, written{0}, timeouts{0}, in_flight{0};
  std::atomic<uint64_t> dropped{0}, not_dropped{0}, quarantined{0};
  std::atomic<uint64_t> retry_queued{0}, retry_lost{0}, waiting_updates{0};
  // Afters (capture/after_capture.hpp).
  std::atomic<uint64_t> afters_queued{0}, afters_written{0}, afters_lost{0}, afters_absorbed{0};
  std::atomic<uint64_t> stats_waiting{0}, stats_queries{0}, stats_gave_up{0}, analyzes{0};
  // Announcements of written rows (capture/announcer.hpp).
  std::atomic<uint64_t> announced{0}, announcements_lost{0};
  // The capture pool as the event-loop thread last saw it.
  std::atomic<uint64_t> pool_idle{0}, pool_busy{0}, pool_queued{0}, pool_opened{0};

  void publish(const ConnPool& capture_pool) {
    pool_idle = capture_pool.idle();
    pool_busy = capture_pool.busy();
    pool_queued = capture_pool.queued();
    pool_opened = capture_pool.opened();
  }
};

}  // namespace predrop::capture
