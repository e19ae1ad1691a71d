#!/usr/bin/env bash
# deploy/sql/capture-role.sql against a real PostgreSQL: the role it makes is no superuser, sees
# pg_stats rows of the covered tables (also of tables created after the grant), can write and update
# the store (migrated with `predrop migrate`), and can do nothing else there: no DROP, CREATE, DELETE,
# TRUNCATE. Also shows that pg_read_all_stats alone does not open pg_stats, that the script is
# idempotent, and that it refuses an unmigrated store.
# Uses the cluster in PGHOST/PGPORT/PGUSER (scripts/test.sh) or starts a throwaway one.
# Env: PREDROP_BIN, PREDROP_SOURCE_DIR.
set -euo pipefail
SRC=${PREDROP_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
: "${PREDROP_BIN:?set PREDROP_BIN to the predrop binary}"
PREDROP_BIN=$(realpath "$PREDROP_BIN")
SQL=$SRC/deploy/sql/capture-role.sql
command -v psql >/dev/null || { echo "FAIL: psql missing (postgresql-client-15)" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/predrop-role.XXXXXX")
chmod 0755 "$work"
own_cluster=""
n=$$
cov=predrop_cov_$n store=predrop_store_$n empty=predrop_empty_$n
role=predrop_cap_$n owner=predrop_owner_$n stats=predrop_stats_$n
cleanup() {
  set +e
  if [ -n "${PGPORT:-}" ]; then
    for db in "$cov" "$store" "$empty"; do
      psql -qAt -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1
    done
    for r in "$role" "$owner" "$stats"; do psql -qAt -d postgres -c "DROP ROLE IF EXISTS $r" >/dev/null 2>&1; done
  fi
  [ -n "$own_cluster" ] && "$SRC/scripts/pg-cluster.sh" stop "$own_cluster" >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT
if [ -z "${PGHOST:-}" ] || [ -z "${PGPORT:-}" ]; then
  echo "no PGHOST/PGPORT: starting a throwaway cluster"
  own_cluster=$work/pg
  "$SRC/scripts/pg-cluster.sh" start "$own_cluster" >/dev/null
  set -a; . "$own_cluster/env"; set +a
fi
export PGUSER=${PGUSER:-postgres} PGCONNECT_TIMEOUT=10
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
q() { psql -X -v ON_ERROR_STOP=1 -qAt "$@"; }            # as the admin ($PGUSER)
as() { local who=$1 db=$2; shift 2; q -U "$who" -d "$db" "$@"; }
must_ok() { local what=$1; shift; "$@" >"$work/out" 2>&1 || { cat "$work/out" >&2; fail "$what"; }; }
must_fail() {
  local what=$1; shift
  if "$@" >"$work/out" 2>&1; then fail "$what: succeeded"; return; fi
  grep -q "permission denied\|must be owner" "$work/out" || { cat "$work/out" >&2; fail "$what: failed for another reason"; }
}
check_eq() { [ "$2" = "$3" ] || fail "$1: got '$2', want '$3'"; }
mark=0
section_ok() { [ $failures -eq $mark ] && echo "ok: $*"; mark=$failures; }

q -d postgres <<SQL
SET client_min_messages = warning;
CREATE ROLE $owner LOGIN;
CREATE DATABASE $cov OWNER $owner;
CREATE DATABASE $store;
CREATE DATABASE $empty;
SQL
as "$owner" "$cov" <<'SQL'
CREATE TABLE public.t1 (id int, label text);
INSERT INTO public.t1 SELECT g, 'v' || (g % 7) FROM generate_series(1, 500) g;
ANALYZE public.t1;
SQL
if ! "$PREDROP_BIN" migrate --store "host=$PGHOST port=$PGPORT user=$PGUSER dbname=$store" >"$work/out" 2>&1; then
  cat "$work/out" >&2
  echo "FAIL: predrop migrate could not create the store (the script grants on its tables)" >&2
  exit 1
fi

run_script() {
  q -d "$1" -v role="$role" -v password=capture-secret -v covered_schemas=public -v table_owner="$owner" \
    -v store_db="$2" -f "$SQL"
}
must_ok "capture-role.sql" run_script "$cov" "$store"
must_ok "capture-role.sql, second run (idempotent)" run_script "$cov" "$store"
section_ok "capture-role.sql applied twice"

# A table the owner creates after the grant is covered by default privileges.
as "$owner" "$cov" <<'SQL'
CREATE TABLE public.t2 (id int, kind text);
INSERT INTO public.t2 SELECT g, 'k' || (g % 3) FROM generate_series(1, 300) g;
ANALYZE public.t2;
SQL

check_eq "role attributes" \
  "$(q -d postgres -c "SELECT rolsuper, rolcreaterole, rolcreatedb, rolreplication, rolbypassrls, rolcanlogin FROM pg_roles WHERE rolname = '$role'")" \
  "f|f|f|f|f|t"
check_eq "pg_stats tables visible to the role" \
  "$(as "$role" "$cov" -c "SELECT string_agg(DISTINCT tablename, ',' ORDER BY tablename) FROM pg_stats WHERE schemaname = 'public'")" \
  "t1,t2"
check_eq "catalog shape visible to the role" \
  "$(as "$role" "$cov" -c "SELECT count(*) FROM pg_attribute WHERE attrelid = 'public.t1'::regclass AND attnum > 0")" "2"
must_fail "DROP TABLE as the capture role" as "$role" "$cov" -c "DROP TABLE public.t1"
must_fail "CREATE TABLE as the capture role" as "$role" "$cov" -c "CREATE TABLE public.x (a int)"
must_fail "DELETE on a covered table as the capture role" as "$role" "$cov" -c "DELETE FROM public.t1"
section_ok "covered database: pg_stats visible, nothing destructive allowed"

id=$(as "$role" "$store" -c "INSERT INTO predrop.drop_events (outcome) VALUES ('written') RETURNING id" | head -n1) \
  || fail "INSERT into predrop.drop_events as the capture role"
must_ok "UPDATE predrop.drop_events as the capture role" \
  as "$role" "$store" -c "UPDATE predrop.drop_events SET drop_outcome = 'dropped', outcome_at = now() WHERE id = '$id'"
must_ok "INSERT into the snapshot table as the capture role" as "$role" "$store" -c \
  "INSERT INTO predrop.schema_snapshots (schema_name, table_name, reason, actor, schema_hash) VALUES ('public', 't1', 'test', 'test', 'h')"
must_ok "claim a baseline round in predrop.schedule_rounds as the capture role" as "$role" "$store" -c \
  "INSERT INTO predrop.schedule_rounds AS r (schedule, store_table, round_start) VALUES ('baseline', 'predrop.schema_snapshots', now()) ON CONFLICT (schedule, store_table) DO UPDATE SET round_start = EXCLUDED.round_start WHERE r.round_start < EXCLUDED.round_start"
must_ok "share the table ages in predrop.table_ages as the capture role" as "$role" "$store" -c \
  "INSERT INTO predrop.table_ages AS a (store_table, bounds, computed_at, histograms) VALUES ('predrop.schema_snapshots', '{60}', now(), '[]') ON CONFLICT (store_table) DO UPDATE SET computed_at = EXCLUDED.computed_at, histograms = EXCLUDED.histograms, bounds = EXCLUDED.bounds"
must_ok "SELECT predrop.schema_migrations as the capture role" as "$role" "$store" -c "SELECT max(version) FROM predrop.schema_migrations"
must_fail "DELETE on the store as the capture role" as "$role" "$store" -c "DELETE FROM predrop.drop_events"
must_fail "TRUNCATE on the store as the capture role" as "$role" "$store" -c "TRUNCATE predrop.schema_snapshots"
must_fail "CREATE TABLE in the store schema as the capture role" as "$role" "$store" -c "CREATE TABLE predrop.x (a int)"
must_fail "DROP TABLE in the store as the capture role" as "$role" "$store" -c "DROP TABLE predrop.drop_events"
section_ok "store: insert/update/select only"

# pg_read_all_stats does not make pg_stats rows visible (the README says so).
q -d postgres -c "CREATE ROLE $stats LOGIN IN ROLE pg_read_all_stats" >/dev/null
check_eq "pg_stats rows seen with pg_read_all_stats only" \
  "$(as "$stats" "$cov" -c "SELECT count(*) FROM pg_stats WHERE schemaname = 'public'")" "0"

# An unmigrated store is refused with a message.
if q -d "$cov" -v role="$role" -v store_db="$empty" -f "$SQL" >"$work/out" 2>&1; then
  fail "capture-role.sql accepted a store without predrop's tables"
elif ! grep -q "predrop migrate" "$work/out"; then
  cat "$work/out" >&2; fail "capture-role.sql failed on an unmigrated store without saying to migrate"
fi
section_ok "pg_read_all_stats alone sees no pg_stats rows; an unmigrated store is refused"

if [ $failures -ne 0 ]; then
  echo "capture_role_test: $failures failure(s)" >&2
  exit 1
fi
echo "capture_role_test: all checks passed"
