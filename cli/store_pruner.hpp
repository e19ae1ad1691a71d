// store.retention inside serve (issue 25, part 4): every store.prune_interval_s one sidecar of a
// fleet (an advisory lock on the store) prunes the snapshots evidence/retention.hpp lets go, in
// small batches under a lock timeout, and /metrics gets predrop_store_pruned_total and
// predrop_store_snapshots. Off while store.retention is 0 (the default).
#pragma once

#include <memory>

#include "cli/periodic.hpp"
#include "policy/policy.hpp"

namespace predrop::cli {

// The pruning inside serve, on a thread of its own; null while store.retention is 0 or there is no
// store.
std::unique_ptr<PeriodicTask> start_store_pruner(std::shared_ptr<const policy::Config> config);

}  // namespace predrop::cli
