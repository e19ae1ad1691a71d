// The quarantine purger inside serve (issue 16): every quarantine.purge_interval_s one sidecar of
// a fleet (the one holding a session-level advisory lock on the store) walks every database that
// allows connections, drops what outlived quarantine.retention and, oldest first, what passes
// quarantine.max_tables / max_bytes, each table in a transaction of its own under
// quarantine.lock_timeout_ms: a table an application holds a lock on is skipped, logged and tried
// again next round, so the purger never queues behind the application. It also brings the store's
// predrop.quarantine rows in line with the catalog, and sets the /metrics figures.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "policy/policy.hpp"

namespace predrop::cli {

inline constexpr int kQuarantineLockClass = 1885434225;  // "pdqq"

class QuarantinePurger {
 public:
  using Overrides = std::function<void(policy::Config&)>;
  QuarantinePurger(std::shared_ptr<const policy::Config> config, std::string config_path, Overrides overrides);
  ~QuarantinePurger();
  QuarantinePurger(const QuarantinePurger&) = delete;
  QuarantinePurger& operator=(const QuarantinePurger&) = delete;
  void stop();

  struct State;

 private:
  std::shared_ptr<State> state_;
  std::thread rounds_, signals_;
};

}  // namespace predrop::cli
