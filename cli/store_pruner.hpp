// store.retention inside serve (issue 25, part 4): every store.prune_interval_s one sidecar of a
// fleet (an advisory lock on the store) prunes the snapshots evidence/retention.hpp lets go, in
// small batches under a lock timeout, and /metrics gets predrop_store_pruned_total and
// predrop_store_snapshots. Off while store.retention is 0 (the default).
#pragma once

#include <memory>

#include "cli/periodic.hpp"
#include "policy/policy.hpp"

namespace predrop::cli {

class StorePruner {
 public:
  explicit StorePruner(std::shared_ptr<const policy::Config> config);
  ~StorePruner();
  StorePruner(const StorePruner&) = delete;
  StorePruner& operator=(const StorePruner&) = delete;
  void stop();

 private:
  std::unique_ptr<PeriodicTask> task_;   // null when off
};

}  // namespace predrop::cli
