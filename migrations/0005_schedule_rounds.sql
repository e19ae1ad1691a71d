-- predrop store, version 5: the last round of a fleet-wide schedule that some serve walked. The
-- advisory lock keeps two passes from overlapping; it cannot keep a sidecar whose timer fired late
-- (a busy host, a pass that overran) from walking, after the lock was let go, a round another
-- sidecar walked already. A serve claims a round here, under the lock, before walking it: a round
-- whose start is not later than the one recorded is skipped (issue 24).
CREATE TABLE IF NOT EXISTS predrop.schedule_rounds (
  schedule    text        NOT NULL,   -- 'baseline'
  store_table text        NOT NULL,   -- the snapshot table the schedule writes to
  round_start timestamptz NOT NULL,   -- the start of the last round claimed
  claimed_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (schedule, store_table)
);
