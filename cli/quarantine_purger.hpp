// The quarantine purger inside serve (issue 16): every quarantine.purge_interval_s one sidecar of
// a fleet (the one holding a session-level advisory lock on the store) walks every database that
// allows connections, drops what outlived quarantine.retention and, oldest first, what passes
// quarantine.max_tables / max_bytes, each table in a transaction of its own under
// quarantine.lock_timeout_ms: a table an application holds a lock on is skipped, logged and tried
// again next round, so the purger never queues behind the application. It also brings the store's
// predrop.quarantine rows in line with the catalog, and sets the /metrics figures.
#pragma once

#include <memory>
#include <string>

#include "cli/fleet_schedule.hpp"
#include "policy/policy.hpp"

namespace predrop::cli {

inline constexpr int kQuarantineLockClass = 1885434225;  // "pdqq"

// Its rounds (cli/fleet_schedule.hpp), kicked early by each table quarantined while a cap is set.
class QuarantinePurger {
 public:
  QuarantinePurger(std::shared_ptr<const policy::Config> config, std::string config_path, FleetSchedule::Overrides overrides);
  ~QuarantinePurger();
  QuarantinePurger(const QuarantinePurger&) = delete;
  QuarantinePurger& operator=(const QuarantinePurger&) = delete;
  void stop();

 private:
  std::unique_ptr<FleetSchedule> schedule_;
};

}  // namespace predrop::cli
