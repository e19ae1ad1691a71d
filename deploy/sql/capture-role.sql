-- predrop's capture/store role with the least privileges it needs. Never a superuser.
--
-- Run as a role that may create roles and grant on the objects involved (the owner of the covered
-- tables and of the store, or an admin), once per covered database:
--
--   psql -v ON_ERROR_STOP=1 -d appdb \
--        -v role=predrop_capture -v password="$PREDROP_CAPTURE_PASSWORD" \
--        -v covered_schemas=public,staging -v table_owner=app_owner \
--        -v store_db=predrop -v store_schema=predrop -v store_table=schema_snapshots \
--        -f deploy/sql/capture-role.sql
--
-- Variables (psql -v NAME=VALUE); every one is optional except as noted:
--   role             the login role predrop connects as (default predrop_capture)
--   password         its password; leave unset to keep the current one (or use cert/peer auth)
--   conn_limit       CONNECTION LIMIT (default -1, none). Each predrop instance opens up to
--                    capture.pool_size connections per database it snapshots in, plus its store
--                    connections: size it as instances x (pool_size x databases + 2) or leave it.
--   covered_schemas  comma-separated schemas of the connected database whose tables predrop
--                    snapshots; the role gets SELECT on their tables, now and (for tables that
--                    table_owner creates later) by default privileges. pg_stats shows a column's
--                    value profile only to roles that may SELECT it. Unset: no table grants
--                    (shapes are still captured from the catalog, profiles come back empty).
--   table_owner      the role that creates tables in covered_schemas (default: current user)
--   store_db         the snapshot store's database; set it in one of the runs to grant there.
--                    Create the store first, as its owner: predrop migrate --store 'dbname=… user=owner'
--   store_schema     schema of store.table (default predrop)
--   store_table      table of store.table (default schema_snapshots)
--
-- What the role gets, and nothing more:
--   CONNECT on the covered database and on store_db;
--   SELECT on the covered tables (pg_stats value profiles);
--   USAGE on the store schemas; SELECT, INSERT, UPDATE on the snapshot table, predrop.drop_events,
--   predrop.quarantine, predrop.schedule_rounds (the baseline schedule's claimed rounds) and
--   predrop.table_ages (the table ages' histograms one serve computes for the fleet);
--   SELECT on predrop.schema_migrations (start-up version check).
-- Not: CREATE anywhere, DELETE/TRUNCATE on the store, superuser, CREATEROLE, CREATEDB, REPLICATION,
-- BYPASSRLS. Because it cannot CREATE in the store, run predrop with store.migrate_on_start: false
-- (--no-migrate) and apply migrations with `predrop migrate` as the store's owner on upgrades.
-- pg_read_all_stats does not help: it opens the pg_stat_* activity views, not pg_stats.
-- The script is idempotent: run it again after adding a schema or rotating the password.

\set ON_ERROR_STOP on
SET client_min_messages = warning;
\if :{?role}
\else
  \set role predrop_capture
\endif
\if :{?conn_limit}
\else
  \set conn_limit -1
\endif
\if :{?store_schema}
\else
  \set store_schema predrop
\endif
\if :{?store_table}
\else
  \set store_table schema_snapshots
\endif
\if :{?table_owner}
\else
  SELECT current_user AS table_owner \gset
\endif

-- ---- the role ----------------------------------------------------------------------------------
SELECT NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = :'role') AS predrop_create_role \gset
\if :predrop_create_role
  CREATE ROLE :"role" LOGIN;
\endif
ALTER ROLE :"role" LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS INHERIT
  CONNECTION LIMIT :conn_limit;
\if :{?password}
  SET password_encryption = 'scram-sha-256';
  ALTER ROLE :"role" PASSWORD :'password';
\endif

-- ---- the covered database (the one psql is connected to) --------------------------------------
SELECT format('GRANT CONNECT ON DATABASE %I TO %I', current_database(), :'role') \gexec
\if :{?covered_schemas}
  SELECT format('GRANT SELECT ON ALL TABLES IN SCHEMA %I TO %I', s, :'role')
    FROM unnest(string_to_array(:'covered_schemas', ',')) AS s \gexec
  SELECT format('ALTER DEFAULT PRIVILEGES FOR ROLE %I IN SCHEMA %I GRANT SELECT ON TABLES TO %I',
                :'table_owner', s, :'role')
    FROM unnest(string_to_array(:'covered_schemas', ',')) AS s \gexec
\endif

-- ---- the quarantine (opt-in: rules with action: quarantine; README "Quarantine: least privileges")
-- quarantine_schema  create it here, owned by the role (so the purger may drop what it holds),
--                    with CREATE for everyone and USAGE for nobody (a quarantined table is out of reach),
--                    and the schema predrop_quarantine_move, owned by the role with USAGE for everyone,
--                    where predrop installs the move as a function (without it the move runs inline,
--                    compiled at every DROP)
-- quarantine_owners  comma-separated roles that own quarantined tables: membership lets undrop
--                    move them back (leave unset to run undrop as an operator instead)
\if :{?quarantine_schema}
  SELECT format('CREATE SCHEMA IF NOT EXISTS %I AUTHORIZATION %I', :'quarantine_schema', :'role') \gexec
  SELECT format('ALTER SCHEMA %I OWNER TO %I', :'quarantine_schema', :'role') \gexec
  SELECT format('REVOKE ALL ON SCHEMA %I FROM PUBLIC', :'quarantine_schema') \gexec
  SELECT format('GRANT CREATE ON SCHEMA %I TO PUBLIC', :'quarantine_schema') \gexec
  SELECT format('CREATE SCHEMA IF NOT EXISTS predrop_quarantine_move AUTHORIZATION %I', :'role') \gexec
  SELECT format('ALTER SCHEMA predrop_quarantine_move OWNER TO %I', :'role') \gexec
  REVOKE ALL ON SCHEMA predrop_quarantine_move FROM PUBLIC;
  GRANT USAGE ON SCHEMA predrop_quarantine_move TO PUBLIC;
\endif
\if :{?quarantine_owners}
  SELECT format('GRANT %I TO %I', o, :'role')
    FROM unnest(string_to_array(:'quarantine_owners', ',')) AS o \gexec
\endif

-- ---- the store ----------------------------------------------------------------------------------
\if :{?store_db}
  \connect :"store_db"
  SET client_min_messages = warning;
  SELECT format('GRANT CONNECT ON DATABASE %I TO %I', current_database(), :'role') \gexec
  SELECT to_regclass('predrop.drop_events') IS NULL AS predrop_no_store \gset
  \if :predrop_no_store
    DO $$ BEGIN
      RAISE EXCEPTION 'capture-role.sql: the store has no predrop.drop_events; run `predrop migrate` as its owner first';
    END $$;
  \endif
  SELECT format('GRANT USAGE ON SCHEMA %I TO %I', s, :'role')
    FROM (SELECT DISTINCT unnest(ARRAY['predrop', :'store_schema']) AS s) AS schemas \gexec
  SELECT format('GRANT SELECT, INSERT, UPDATE ON TABLE %I.%I, predrop.drop_events TO %I',
                :'store_schema', :'store_table', :'role') \gexec
  SELECT format('GRANT SELECT ON TABLE predrop.schema_migrations TO %I', :'role') \gexec
  -- Store version 3: the quarantine's rows (written after commit, reconciled by the purger).
  SELECT format('GRANT SELECT, INSERT, UPDATE ON TABLE predrop.quarantine TO %I', :'role')
    WHERE to_regclass('predrop.quarantine') IS NOT NULL \gexec
  SELECT format('GRANT SELECT, INSERT, UPDATE ON TABLE predrop.schedule_rounds TO %I', :'role')
    WHERE to_regclass('predrop.schedule_rounds') IS NOT NULL \gexec
  SELECT format('GRANT SELECT, INSERT, UPDATE ON TABLE predrop.table_ages TO %I', :'role')
    WHERE to_regclass('predrop.table_ages') IS NOT NULL \gexec
  -- The store is predrop's own: nothing else in it for this role.
  SELECT format('REVOKE CREATE ON SCHEMA %I FROM %I', s, :'role')
    FROM (SELECT DISTINCT unnest(ARRAY['predrop', :'store_schema']) AS s) AS schemas \gexec
\endif
