// Whether the store takes writes (predrop_store_up, its last success). The last snapshot write,
// failed store write or store check decides; with no verdict for check_interval, a thread of its
// own checks. The check blocks (up to connect_timeout + statement_timeout of store_writable), so it
// never runs on the event loop: a hung store must not stall captures.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace predrop::capture {

class StoreHealth {
 public:
  StoreHealth(std::string store_conninfo, std::string store_table, std::string events_table,
              std::chrono::milliseconds check_interval);
  ~StoreHealth();
  StoreHealth(const StoreHealth&) = delete;
  StoreHealth& operator=(const StoreHealth&) = delete;

  // A verdict from any thread; a change is logged once.
  void note(bool ok, const std::string& why);
  // Checks now, blocking, and notes the verdict. Empty when writable; else why not.
  std::string check();
  bool up() const { return up_ == 1; }
  double last_success_unix_s() const { return success_unix_ms_ / 1000.0; }
  // Ends the checking thread (waits for a check under way).
  void stop();

 private:
  void watch();

  const std::string conninfo_, store_table_, events_table_;
  const std::chrono::milliseconds interval_;
  std::atomic<int> up_{-1};                // -1: not known yet
  std::atomic<int64_t> verdict_at_{0};     // steady clock ticks
  std::atomic<int64_t> success_unix_ms_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace predrop::capture
