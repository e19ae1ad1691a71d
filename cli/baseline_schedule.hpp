// The baseline inside serve: every baseline.interval_s a pass over baseline.databases, run by one
// sidecar of a fleet at a time. Rounds fall on multiples of the interval since the epoch, so the
// sidecars of a fleet try at the same moment; each round one of them takes a session-level
// advisory lock on the store and walks, the others find it taken and skip the round. The pass
// runs on a thread of its own with its own connections: the relay never waits for it.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "policy/policy.hpp"

namespace predrop::cli {

// The advisory lock of a round: (kBaselineLockClass, hashtext(store.table)), so fleets writing
// different store tables in one store database do not wait for each other.
inline constexpr int kBaselineLockClass = 1885626988;  // "pdbl"

// libpq conninfo (key=value or URI) with dbname set to `dbname`, as key=value text.
std::string conninfo_with_dbname(const std::string& conninfo, const std::string& dbname);
// The conninfo as it is when it names a database, else with `dbname`: the capture conninfo usually
// names none (libpq would then try a database named after the role).
std::string conninfo_or_dbname(const std::string& conninfo, const std::string& dbname);

class BaselineSchedule {
 public:
  using Overrides = std::function<void(policy::Config&)>;
  // Starts the schedule's threads. The baseline.* keys are re-read from config_path on SIGHUP
  // (with overrides applied, restart-only keys kept), as serve itself reloads.
  BaselineSchedule(std::shared_ptr<const policy::Config> config, std::string config_path, Overrides overrides);
  ~BaselineSchedule();
  BaselineSchedule(const BaselineSchedule&) = delete;
  BaselineSchedule& operator=(const BaselineSchedule&) = delete;

  // Ends a running pass before its next batch, releases the lock and joins.
  void stop();

  struct State;

 private:
  std::shared_ptr<State> state_;
  std::thread rounds_, signals_;
};

}  // namespace predrop::cli
