-- predrop store, version 3: the quarantine (issue 16). One row per quarantined table, in
-- predrop.quarantine whatever store.table is (a quarantined table is not a snapshot). The
-- quarantined table's own comment is the truth; these rows follow it: the proxy writes 'held'
-- after the client's transaction committed, the purger inserts what it finds missing and marks
-- rows 'purged' (expired, cap or manual), undrop marks them 'restored'.
CREATE TABLE IF NOT EXISTS predrop.quarantine (
  id                uuid PRIMARY KEY,
  database_name     text        NOT NULL,
  schema_name       text        NOT NULL,
  table_name        text        NOT NULL,
  table_oid         bigint      NOT NULL,
  quarantine_schema text        NOT NULL,
  quarantine_table  text        NOT NULL,
  dropped_at        timestamptz NOT NULL,
  expires_at        timestamptz,
  bytes             bigint,
  snapshot_id       uuid,
  event_id          uuid,
  dropped_by        text,
  application_name  text,
  client_addr       text,
  state             text        NOT NULL DEFAULT 'held' CHECK (state IN ('held', 'restored', 'purged')),
  state_at          timestamptz NOT NULL DEFAULT now(),
  state_reason      text,
  detail            jsonb
);
-- undrop and list look a table's versions up by name, newest first; the purger what is held.
CREATE INDEX IF NOT EXISTS quarantine_by_name ON predrop.quarantine (database_name, schema_name, table_name, dropped_at);
CREATE INDEX IF NOT EXISTS quarantine_held ON predrop.quarantine (database_name, dropped_at) WHERE state = 'held';
-- The ledger row of a quarantined table names its quarantine (the snapshot row's extra does too).
ALTER TABLE predrop.drop_events ADD COLUMN IF NOT EXISTS quarantine_id uuid;
