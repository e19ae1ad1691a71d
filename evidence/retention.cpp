#include "evidence/retention.hpp"

#include <stdexcept>

namespace predrop::evidence {

namespace {

int64_t as_int(const capture::PgResult& r, int col) {
  return r.is_null(0, col) ? 0 : std::stoll(r.text(0, col));
}

}  // namespace

StoreSize store_size(PgSession& store, const std::string& store_table) {
  const std::string t = store.quote_qualified(store_table);
  auto r = store.exec("SELECT count(*), pg_total_relation_size($1::regclass) FROM " + t, {t});
  return {as_int(r, 0), as_int(r, 1)};
}

PruneCounts prune_store(PgSession& store, const std::string& store_table, const PruneOptions& o) {
  if (o.retention_s <= 0) throw std::invalid_argument("retention must be positive");
  const std::string t = store.quote_qualified(store_table);
  PruneCounts c;
  const capture::Params key{std::to_string(kPruneLockClass), store_table};
  // Counting needs no lock: only a run that deletes keeps other sidecars out.
  if (!o.dry_run && store.exec("SELECT pg_try_advisory_lock($1::int, hashtext($2))", key).text(0, 0) != "t") {
    c.locked_out = true;
    return c;
  }
  struct Unlock {
    PgSession& s;
    const capture::Params& k;
    bool held;
    ~Unlock() {
      if (!held) return;
      try {
        s.exec("SELECT pg_advisory_unlock($1::int, hashtext($2))", k);
      } catch (...) {
      }
    }
  } unlock{store, key, !o.dry_run};

  // What each old snapshot is kept for, computed once from the whole store: the windows need
  // every snapshot of a table, the old ones are a filter on top.
  const std::string old_snapshots =
      "WITH s AS ("
      "  SELECT id, captured_at,"
      "         row_number() OVER (PARTITION BY database_name, schema_name, table_name, schema_hash"
      "                            ORDER BY captured_at, id) AS nth_of_shape,"
      "         row_number() OVER (PARTITION BY database_name, schema_name, table_name"
      "                            ORDER BY captured_at DESC, id DESC) AS nth_newest"
      "  FROM " + t + "),"
      " newest_pair AS ("
      "  SELECT DISTINCT ON (database_name, schema_name, table_name) id AS after_id, pair_of AS before_id"
      "  FROM " + t + " WHERE pair_of IS NOT NULL"
      "  ORDER BY database_name, schema_name, table_name, captured_at DESC, id DESC),"
      " pair_ids AS (SELECT after_id AS id FROM newest_pair UNION SELECT before_id FROM newest_pair),"
      " held AS (SELECT snapshot_id AS id FROM predrop.quarantine WHERE snapshot_id IS NOT NULL)"
      " SELECT s.id, s.id IN (SELECT id FROM pair_ids) AS newest_pair, s.nth_of_shape = 1 AS first_of_shape,"
      "        s.nth_newest = 1 AS newest, s.id IN (SELECT id FROM held) AS quarantined"
      " FROM s WHERE s.captured_at < now() - make_interval(secs => $1::bigint)";
  const std::string counts =
      "SELECT count(*), count(*) FILTER (WHERE newest_pair), count(*) FILTER (WHERE first_of_shape),"
      " count(*) FILTER (WHERE newest), count(*) FILTER (WHERE quarantined),"
      " count(*) FILTER (WHERE NOT (newest_pair OR first_of_shape OR newest OR quarantined))";
  const capture::Params retention{std::to_string(o.retention_s)};
  const StoreSize size = store_size(store, store_table);
  // A dry run reads only (a read-only session may run it); a run keeps the list in a temporary table.
  auto r = o.dry_run ? store.exec(counts + " FROM (" + old_snapshots + ") o", retention)
                     : (store.run("DROP TABLE IF EXISTS pg_temp.predrop_prune"),
                        store.exec("CREATE TEMP TABLE predrop_prune AS " + old_snapshots, retention),
                        store.exec(counts + " FROM pg_temp.predrop_prune"));
  c.snapshots = size.snapshots;
  c.store_bytes = size.bytes;
  c.older = as_int(r, 0);
  c.kept_newest_pair = as_int(r, 1);
  c.kept_first_of_shape = as_int(r, 2);
  c.kept_newest = as_int(r, 3);
  c.kept_quarantine = as_int(r, 4);
  c.prunable = as_int(r, 5);
  if (o.dry_run) return c;
  if (c.prunable == 0) {
    store.run("DROP TABLE IF EXISTS pg_temp.predrop_prune");
    return c;
  }
  store.run("DELETE FROM pg_temp.predrop_prune WHERE newest_pair OR first_of_shape OR newest OR quarantined; "
            "CREATE INDEX ON pg_temp.predrop_prune (id)");
  // Small transactions that never wait long for a lock: the hold path writes this table.
  store.exec("SELECT set_config('lock_timeout', $1, false)", {std::to_string(o.lock_timeout_ms)});
  try {
    for (;;) {
      auto d = store.exec(
          "WITH batch AS (DELETE FROM pg_temp.predrop_prune WHERE id IN ("
          "  SELECT id FROM pg_temp.predrop_prune LIMIT $1) RETURNING id)"
          " DELETE FROM " + t + " s USING batch WHERE s.id = batch.id",
          {std::to_string(o.batch)});
      const char* tuples = PQcmdTuples(d.res.get());
      const int64_t n = tuples && *tuples ? std::stoll(tuples) : 0;
      c.pruned += n;
      if (store.exec("SELECT EXISTS (SELECT FROM pg_temp.predrop_prune)").text(0, 0) != "t") break;
    }
  } catch (...) {
    // The batch's own error is the one to report, whatever this cleanup meets.
    try {
      store.run("RESET lock_timeout; DROP TABLE IF EXISTS pg_temp.predrop_prune");
    } catch (...) {
    }
    throw;
  }
  store.run("RESET lock_timeout; DROP TABLE IF EXISTS pg_temp.predrop_prune");
  return c;
}

}  // namespace predrop::evidence
