// The baseline pass (the reference application's baseline_schema_snapshots): snapshot every live
// table whose latest snapshot does not hold exactly the column names the table has now, so that the
// next change has something to be compared against. Strictly read-only against the target: its
// sessions run with default_transaction_read_only=on and every batch is a READ ONLY transaction
// that reads only the catalog and pg_stats; all writes go to the store, on other connections.
// Batches run in `lanes` (a target session and a store writer each), and within a lane the store
// write of one batch overlaps the catalog reads of the next.
// predrop's own tables are never baselined: the schema predrop (the ledger, migrations) and the
// store table wherever store_table puts it, in whatever database the target is; a baseline of the
// store's own database would otherwise snapshot the store. Every row written is announced with
// pg_notify('predrop_snapshots', payload) in the statement that inserts it, the payload a JSON
// object with the keys the capture side's writes use too: id, database, schema, table, reason,
// schema_hash, pair_of (null here) and captured_at.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "capture/catalog_queries.hpp"
#include "evidence/store_reader.hpp"

namespace predrop::evidence {

struct BaselineOptions {
  std::string target_conninfo;
  std::string store_conninfo;
  std::string store_table = "predrop.schema_snapshots";
  std::vector<std::string> schemas;  // empty: every user schema the filter admits
  // Policy filter (database, schema, table) -> snapshot it? Empty: everything.
  std::function<bool(const std::string&, const std::string&, const std::string&)> include;
  int limit = 0;                     // at most this many captures per run; 0: all
  // Tables per catalog read and per store write. Within a lane the store write of one batch
  // overlaps the catalog read of the next, so smaller batches overlap more, each batch costing a
  // round trip: 300 analysed tables went 1,350 tables/s at 500 a batch, 1,800 at 100 and 1,860 at
  // 50 (tests/bench/baseline, 2 cores, the server local).
  int batch_size = 100;
  // Batches in flight: a target session and a store writer each. Another lane opens two more
  // connections whose backends start cold; with the server's CPU the limit (2 cores, the server
  // local) two lanes were slower than one at 300 tables (1,440 against 1,670 tables/s) and at
  // 2,000 (3,340 against 3,540). They can pay where round trips are long (a remote server).
  int lanes = 1;
  capture::ProfileBounds bounds;
  bool naive_array_split = false;
  std::vector<std::string> hash_excluded = {"_source_dataset_id", "_ingested_at", "_source_url"};
  std::string enrich_identity_sql;    // run on the target, read-only, as the proxy's capture does
  std::string enrich_provenance_sql;
  std::string actor = "predrop baseline";
  std::function<void(int done, int total)> progress;  // after every batch
  std::function<bool()> cancelled;  // asked before every batch: true ends the run there
};

struct BaselineResult {
  std::string database;
  int tables = 0;       // live tables considered
  int candidates = 0;   // whose latest snapshot's names differ (or that have none)
  int captured = 0;
  int skipped = 0;      // vanished meanwhile, or their batch failed
  int remaining = 0;    // candidates still without a matching snapshot after this run
  double seconds = 0;
  double tables_per_s = 0;  // captured / seconds, end to end
  bool interrupted = false;  // cancelled() ended the run before its last batch
  std::vector<std::string> errors;
};

BaselineResult run_baseline(const BaselineOptions& opt);

// The blocking twin of a capture's catalog reads: columns, reltuples, pg_stats profile and the
// hash for each named relation, in two statements inside the caller's transaction. Relations
// that do not exist are absent from the result.
std::vector<capture::CapturedTable> read_tables(PgSession& target, const std::vector<std::pair<std::string, std::string>>& names,
                                       const capture::ProfileBounds& bounds, bool naive,
                                       const std::vector<std::string>& hash_excluded);

}  // namespace predrop::evidence
