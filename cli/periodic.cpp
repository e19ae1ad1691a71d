#include "cli/periodic.hpp"

namespace predrop::cli {

PeriodicTask::PeriodicTask(std::chrono::milliseconds first_delay, std::chrono::milliseconds period,
                           std::string name, std::function<void(spdlog::logger&)> task)
    : first_delay_(first_delay), period_(period), name_(std::move(name)), task_(std::move(task)) {
  thread_ = std::thread([this] { run(); });
}

PeriodicTask::~PeriodicTask() { stop(); }

void PeriodicTask::stop() {
  {
    std::lock_guard lock(m_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool PeriodicTask::stopped_within(std::chrono::milliseconds wait) {
  std::unique_lock lock(m_);
  return cv_.wait_for(lock, wait, [this] { return stop_; });
}

void PeriodicTask::run() {
  // serve names its logger once it starts; what this thread says goes there.
  while (!spdlog::get("predrop"))
    if (stopped_within(std::chrono::milliseconds(20))) return;
  auto log = spdlog::get("predrop");
  if (stopped_within(first_delay_)) return;
  bool warned = false;
  do {
    try {
      task_(*log);
      if (warned) log->info("{} succeeded again", name_);
      warned = false;
    } catch (const std::exception& e) {
      if (!warned) log->warn("{} failed: {}", name_, e.what());
      warned = true;
    }
  } while (!stopped_within(period_));
}

}  // namespace predrop::cli
