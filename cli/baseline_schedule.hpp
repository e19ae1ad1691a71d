// The baseline inside serve: every baseline.interval_s a pass over baseline.databases, run by one
// sidecar of a fleet per round (evidence/fleet_schedule.hpp): the one that takes the baseline lock on
// the store and claims the round there; the others find it taken, or claimed, and skip it.
#pragma once

#include <memory>
#include <string>

#include "evidence/fleet_schedule.hpp"
#include "policy/policy.hpp"

namespace predrop::cli {

using evidence::FleetSchedule;
using evidence::RoundLock;
using evidence::conninfo_or_dbname;
using evidence::conninfo_with_dbname;
using evidence::store_conninfo_of;

// The advisory lock of a round: (kBaselineLockClass, hashtext(store.table)), so fleets writing
// different store tables in one store database do not wait for each other.
inline constexpr int kBaselineLockClass = 1885626988;  // "pdbl"

// Starts the baseline's rounds; the baseline.* keys follow SIGHUP as serve's own do.
std::unique_ptr<FleetSchedule> start_baseline_schedule(std::shared_ptr<const policy::Config> config, std::string config_path,
                                                       FleetSchedule::Overrides overrides);

}  // namespace predrop::cli
