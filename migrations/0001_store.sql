-- predrop store, version 1.
-- Placeholders, filled in by `predrop migrate` with quoted identifiers:
--   {{store_schema}}  schema of the snapshot table (store.table, default predrop)
--   {{store_table}}   the snapshot table, schema-qualified
--   {{ix:SUFFIX}}     index name "ix_<store table name>_SUFFIX"; for raw.raw_schema_snapshots this
--                     gives the reference's own index names, so existing indexes are recognised.
-- Every statement is IF NOT EXISTS: when store.table names an existing table of the reference's
-- shape (raw.raw_schema_snapshots), only what is missing is added.

CREATE SCHEMA IF NOT EXISTS predrop;
CREATE SCHEMA IF NOT EXISTS {{store_schema}};

-- The reference's column set, names, types and defaults (openarg.md §1.1).
CREATE TABLE IF NOT EXISTS {{store_table}} (
  id                    uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  schema_name           varchar(63)  NOT NULL,
  table_name            varchar(63)  NOT NULL,
  resource_identity     varchar(512),
  version               integer,
  reason                varchar(128) NOT NULL,
  actor                 varchar(128) NOT NULL,
  column_count          integer      NOT NULL DEFAULT 0,
  row_count_estimate    bigint,
  schema_hash           varchar(40)  NOT NULL,
  columns_profile       jsonb        NOT NULL DEFAULT '[]'::jsonb,
  stats_available       boolean      NOT NULL DEFAULT false,
  extra                 jsonb,
  captured_at           timestamptz  NOT NULL DEFAULT now(),
  parser_version        varchar(40),
  normalization_version varchar(40),
  layout_profile        varchar(40),
  header_quality        varchar(20),
  is_truncated          boolean
);

-- A reference table from before its 0057 lacks the provenance columns.
ALTER TABLE {{store_table}} ADD COLUMN IF NOT EXISTS parser_version varchar(40);
ALTER TABLE {{store_table}} ADD COLUMN IF NOT EXISTS normalization_version varchar(40);
ALTER TABLE {{store_table}} ADD COLUMN IF NOT EXISTS layout_profile varchar(40);
ALTER TABLE {{store_table}} ADD COLUMN IF NOT EXISTS header_quality varchar(20);
ALTER TABLE {{store_table}} ADD COLUMN IF NOT EXISTS is_truncated boolean;

-- predrop's own columns: where, who, what and what happened next. All nullable, so rows the
-- reference application writes stay valid.
ALTER TABLE {{store_table}} ADD COLUMN IF NOT EXISTS database_name text;
ALTER TABLE {{store_table}} ADD COLUMN IF NOT EXISTS table_oid bigint;
ALTER TABLE {{store_table}} ADD COLUMN IF NOT EXISTS statement_kind text;
ALTER TABLE {{store_table}} ADD COLUMN IF NOT EXISTS statement text;
-- "session_user" is a reserved word (the reference's first cache_drop_audit migration failed on
-- it, and `SELECT session_user FROM t` silently returns the current role), hence the suffix.
ALTER TABLE {{store_table}} ADD COLUMN IF NOT EXISTS session_user_name text;
ALTER TABLE {{store_table}} ADD COLUMN IF NOT EXISTS application_name text;
ALTER TABLE {{store_table}} ADD COLUMN IF NOT EXISTS client_addr text;
ALTER TABLE {{store_table}} ADD COLUMN IF NOT EXISTS hold_ms double precision;
ALTER TABLE {{store_table}} ADD COLUMN IF NOT EXISTS capture_ms double precision;
ALTER TABLE {{store_table}} ADD COLUMN IF NOT EXISTS drop_outcome text;
ALTER TABLE {{store_table}} ADD COLUMN IF NOT EXISTS outcome_at timestamptz;

-- The reference's four indexes.
CREATE INDEX IF NOT EXISTS {{ix:table}} ON {{store_table}} (schema_name, table_name, captured_at DESC);
CREATE INDEX IF NOT EXISTS {{ix:identity}} ON {{store_table}} (resource_identity, captured_at DESC)
  WHERE resource_identity IS NOT NULL;
CREATE INDEX IF NOT EXISTS {{ix:hash}} ON {{store_table}} (schema_hash);
CREATE INDEX IF NOT EXISTS {{ix:provenance}} ON {{store_table}} (parser_version, normalization_version);
-- Outcome confirmation finds rows by table OID within a database.
CREATE INDEX IF NOT EXISTS {{ix:database_oid}} ON {{store_table}} (database_name, table_oid);

-- The ledger: one row per intercepted destructive statement and table, whatever happened.
CREATE TABLE IF NOT EXISTS predrop.drop_events (
  id                uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  occurred_at       timestamptz NOT NULL DEFAULT now(),
  outcome           text        NOT NULL,  -- written | deduplicated | policy_skip | table_missing |
                                           -- timeout | capture_error | store_error | disabled | unresolved |
                                           -- unparsed
  snapshot_id       uuid,                  -- no FK: the snapshot table is configurable
  error             text,
  database_name     text,
  schema_name       text,
  table_name        text,
  table_oid         bigint,
  statement_kind    text,
  statement         text,                  -- normalised: no literal or password
  fingerprint       text,
  session_user_name text,
  application_name  text,
  client_addr       text,
  reason            text,
  actor             text,
  hold_ms           double precision,
  capture_ms        double precision,
  drop_outcome      text,                  -- dropped | not_dropped, once the transaction ended
  outcome_at        timestamptz
);
CREATE INDEX IF NOT EXISTS ix_drop_events_occurred_at ON predrop.drop_events (occurred_at DESC);
CREATE INDEX IF NOT EXISTS ix_drop_events_snapshot_id ON predrop.drop_events (snapshot_id)
  WHERE snapshot_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS ix_drop_events_table ON predrop.drop_events (database_name, schema_name, table_name);
