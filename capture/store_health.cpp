#include "capture/store_health.hpp"

#include <spdlog/spdlog.h>

#include "capture/store_admin.hpp"

namespace predrop::capture {

using Clock = std::chrono::steady_clock;

StoreHealth::StoreHealth(std::string store_conninfo, std::string store_table, std::string events_table,
                         std::chrono::milliseconds check_interval)
    : conninfo_(std::move(store_conninfo)),
      store_table_(std::move(store_table)),
      events_table_(std::move(events_table)),
      interval_(check_interval) {
  thread_ = std::thread([this] { watch(); });
}

StoreHealth::~StoreHealth() { stop(); }

void StoreHealth::note(bool ok, const std::string& why) {
  int was = up_.exchange(ok ? 1 : 0);
  verdict_at_ = Clock::now().time_since_epoch().count();
  if (ok)
    success_unix_ms_ = std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::system_clock::now().time_since_epoch()).count();
  if (was != 0 && !ok) spdlog::warn("predrop store not writable: {}", why);
  if (was == 0 && ok) spdlog::info("predrop store writable again");
}

std::string StoreHealth::check() {
  std::string err = store_writable(conninfo_, store_table_, events_table_);
  note(err.empty(), err);
  return err;
}

void StoreHealth::watch() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    auto since = Clock::now() - Clock::time_point(Clock::duration(verdict_at_.load()));
    if (up_.load() >= 0 && since < interval_) {
      cv_.wait_for(lock, interval_ - since, [this] { return stop_; });
      continue;
    }
    lock.unlock();
    check();
    lock.lock();
  }
}

void StoreHealth::stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace predrop::capture
