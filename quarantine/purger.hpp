// The quarantine purger inside serve (issue 16): every quarantine.purge_interval_s one sidecar of
// a fleet (the one holding a session-level advisory lock on the store) walks every database that
// allows connections, drops what outlived quarantine.retention and, oldest first, what passes
// quarantine.max_tables / max_bytes, each table in a transaction of its own under
// quarantine.lock_timeout_ms: a table an application holds a lock on is skipped, logged and tried
// again next round, so the purger never queues behind the application. It also brings the store's
// predrop.quarantine rows in line with the catalog, and sets the /metrics figures. While a cap is
// set, a table quarantined kicks a round for its database within a second (see purger.cpp for
// what such rounds keep between them).
#pragma once

#include <memory>
#include <string>

#include "evidence/fleet_schedule.hpp"
#include "policy/policy.hpp"

namespace predrop::quarantine {

inline constexpr int kQuarantineLockClass = 1885434225;  // "pdqq"

// Its rounds (evidence/fleet_schedule.hpp), kicked early by each table quarantined while a cap is set.
class Purger {
 public:
  Purger(std::shared_ptr<const policy::Config> config, std::string config_path, evidence::FleetSchedule::Overrides overrides);
  ~Purger();
  Purger(const Purger&) = delete;
  Purger& operator=(const Purger&) = delete;
  void stop();

 private:
  std::unique_ptr<evidence::FleetSchedule> schedule_;
};

}  // namespace predrop::quarantine
