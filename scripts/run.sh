#!/usr/bin/env bash
# `make run`: a throwaway PostgreSQL in ./.run/pg (reused while it runs) and predrop in front of it on
# 127.0.0.1:6432, in the foreground. Ctrl-C stops predrop and the cluster.
#   scripts/run.sh [BUILD_DIR]
# Environment: PREDROP_RUN_PORT (6432), PREDROP_RUN_ARGS (extra `predrop serve` arguments),
# PREDROP_RUN_DIR (./.run).
set -euo pipefail
BUILD_DIR=${1:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
case "$BUILD_DIR" in /*) ;; *) BUILD_DIR=$root/$BUILD_DIR;; esac
bin=$BUILD_DIR/cli/predrop
[ -x "$bin" ] || { echo "run: $bin not built (make build)" >&2; exit 1; }
run=${PREDROP_RUN_DIR:-$root/.run}
port=${PREDROP_RUN_PORT:-6432}
mkdir -p "$run"
chmod 0755 "$run"

# The cluster: reuse it if it is still running, start it otherwise (initdb only the first time).
cluster_running() {
  [ -f "$run/pg/env" ] && [ -f "$run/pg/data/postmaster.pid" ] &&
    (set -a; . "$run/pg/env"; pg_isready -q -h "$PGHOST" -p "$PGPORT")
}
if cluster_running; then
  echo "run: reusing the cluster in $run/pg"
elif [ -f "$run/pg/data/PG_VERSION" ]; then
  echo "run: restarting the cluster in $run/pg"
  . "$run/pg/env"
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u postgres -- /usr/lib/postgresql/15/bin/pg_ctl -D "$run/pg/data" -l "$run/pg/server.log" -w -t 60 start >/dev/null
  else
    /usr/lib/postgresql/15/bin/pg_ctl -D "$run/pg/data" -l "$run/pg/server.log" -w -t 60 start >/dev/null
  fi
else
  echo "run: starting a throwaway cluster in $run/pg"
  rm -rf "$run/pg"
  "$root/scripts/pg-cluster.sh" start "$run/pg" >/dev/null
  (set -a; . "$run/pg/env"; set +a; "$root/scripts/test-roles.sh")
fi
set -a; . "$run/pg/env"; set +a

# The snapshot store and capture setup: later engineers extend this (e.g. a store database and
# --store/--capture conninfos). For now predrop runs with its defaults plus PREDROP_RUN_ARGS.
extra=()
# shellcheck disable=SC2206
[ -n "${PREDROP_RUN_ARGS:-}" ] && extra=($PREDROP_RUN_ARGS)

pid=""
stop_all() {
  trap - INT TERM EXIT
  echo
  echo "run: stopping predrop and the cluster"
  [ -n "$pid" ] && "$root/tests/support/stop-predrop.sh" "$pid" || true
  "$root/scripts/pg-cluster.sh" stop "$run/pg" || true
}
trap stop_all EXIT
trap 'exit 130' INT TERM

if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
  echo "run: 127.0.0.1:$port is already in use (another make run?); set PREDROP_RUN_PORT" >&2
  exit 1
fi
# Capture and store on the same throwaway cluster: snapshots land in schema predrop of database postgres.
admin_port=${PREDROP_RUN_ADMIN_PORT:-9187}
"$bin" serve --listen "127.0.0.1:$port" --upstream "$PGHOST:$PGPORT" \
  --capture "host=$PGHOST port=$PGPORT user=postgres" \
  --store "host=$PGHOST port=$PGPORT user=postgres dbname=postgres" \
  --admin "127.0.0.1:$admin_port" "${extra[@]}" &
pid=$!
for _ in $(seq 1 200); do
  (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
  kill -0 "$pid" 2>/dev/null || { wait "$pid" || true; echo "run: predrop exited before accepting on :$port" >&2; exit 1; }
  sleep 0.05
done

cat <<EOF

  PostgreSQL $PGHOST:$PGPORT (data in $run/pg), predrop 127.0.0.1:$port -> $PGHOST:$PGPORT

  Connect through predrop:

    psql -h 127.0.0.1 -p $port -U postgres postgres

  Drop a table there, then see its snapshot (taken before the drop) and the ledger:

    CREATE TABLE pets (id int, name text); INSERT INTO pets VALUES (1, 'rex'); ANALYZE pets;
    DROP TABLE pets;
    SELECT captured_at, schema_name, table_name, column_count, schema_hash, drop_outcome, hold_ms,
           jsonb_pretty(columns_profile) FROM predrop.schema_snapshots ORDER BY captured_at DESC LIMIT 1;
    SELECT occurred_at, outcome, table_name, statement FROM predrop.drop_events ORDER BY occurred_at DESC;

  Metrics: curl -s http://127.0.0.1:$admin_port/metrics | grep ^predrop_

  Test roles: scram_user / scram-secret (SCRAM-SHA-256), md5_user / md5-secret (md5).
  Ctrl-C stops predrop and the cluster.

EOF
wait "$pid" || true
