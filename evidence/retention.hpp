// A store that keeps what matters (issue 25, part 4; spec 023 CL-023-002): snapshots older than
// store.retention are pruned, except what the evidence needs forever or now:
//   - the newest complete pair of each table (its before and its after);
//   - the first snapshot of each distinct schema_hash of a table (every shape it ever had);
//   - the newest snapshot of each table (its current version: `predrop ages` reads it);
//   - a snapshot a quarantine row names (undrop's evidence).
// A table is its (database_name, schema_name, table_name). The ledger (drop_events) is not pruned:
// its rows keep their snapshot_id, which then names a pruned snapshot.
#pragma once

#include <cstdint>
#include <string>

#include "evidence/store_reader.hpp"

namespace predrop::evidence {

// Advisory lock class of a prune run on the store: one sidecar of a fleet at a time.
inline constexpr int kPruneLockClass = 1885565810;  // "pdpr"

struct PruneCounts {
  int64_t snapshots = 0;        // in the store when the run began
  int64_t store_bytes = 0;      // the store table with its indexes and TOAST
  int64_t older = 0;            // captured before the cutoff
  // Of those, kept for each reason (a snapshot may have several).
  int64_t kept_newest_pair = 0, kept_first_of_shape = 0, kept_newest = 0, kept_quarantine = 0;
  int64_t prunable = 0;         // older and kept for no reason
  int64_t pruned = 0;           // deleted by this run (0 on a dry run)
  bool locked_out = false;      // another sidecar was pruning: nothing was read or deleted
};

struct PruneOptions {
  int64_t retention_s = 0;      // > 0
  bool dry_run = false;
  int batch = 1000;             // snapshots deleted per transaction
  int lock_timeout_ms = 1000;   // each batch's; a batch that times out ends the run (the next one goes on)
};

// The store table's rows and bytes (with its indexes and TOAST).
struct StoreSize {
  int64_t snapshots = 0, bytes = 0;
};
StoreSize store_size(PgSession& store, const std::string& store_table);

// Reads the store once (one sort of it), then deletes the prunable snapshots in batches, each in
// its own transaction. Throws on a failure before any deletion; a batch that fails ends the run with
// the counts so far.
PruneCounts prune_store(PgSession& store, const std::string& store_table, const PruneOptions& options);

}  // namespace predrop::evidence
