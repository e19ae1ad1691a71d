-- predrop store, version 7: the table ages' histograms as the last serve computed them. Every serve
-- on a store shows the same predrop_table_version_age_seconds, and computing it aggregates the
-- whole snapshot table (4.1 s a read at 1,000,000 snapshots): a fleet of 150 sidecars, each every
-- metrics.ages_interval_s, would keep two of the server's cores busy. So one serve computes it,
-- under an advisory lock, and writes it here; the others read this row while it is fresh
-- (evidence/ages.cpp, shared_age_histograms).
CREATE TABLE IF NOT EXISTS predrop.table_ages (
  store_table text        NOT NULL,   -- the snapshot table the ages are read from
  bounds      bigint[]    NOT NULL,   -- the histogram's bucket bounds (seconds) the row was computed with
  computed_at timestamptz NOT NULL,
  histograms  jsonb       NOT NULL,   -- [{database, schema, cumulative: [...], count, sum_s}]
  PRIMARY KEY (store_table)
);
