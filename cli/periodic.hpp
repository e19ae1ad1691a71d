// One background task of serve run every so often on a thread of its own, off the relay (the
// table ages metric, the store's pruning): waits for serve's logger, a first delay, then runs the
// task every period until stop(). A task's exception is logged once until it succeeds again.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include <spdlog/spdlog.h>

namespace predrop::cli {

class PeriodicTask {
 public:
  // name says what the task does in the log's words ("the store's pruning"): "NAME failed: …",
  // then "NAME succeeded again".
  PeriodicTask(std::chrono::milliseconds first_delay, std::chrono::milliseconds period, std::string name,
               std::function<void(spdlog::logger&)> task);
  ~PeriodicTask();
  PeriodicTask(const PeriodicTask&) = delete;
  PeriodicTask& operator=(const PeriodicTask&) = delete;
  void stop();

 private:
  void run();
  bool stopped_within(std::chrono::milliseconds wait);   // waits; true once stop() was called
  std::chrono::milliseconds first_delay_, period_;
  std::string name_;
  std::function<void(spdlog::logger&)> task_;
  std::mutex m_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace predrop::cli
