#!/usr/bin/env bash
# SIGHUP while 50 clients run: a valid file replaces the policy, a broken one keeps the old policy
# and is counted as failed, and no client sees an error.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
support=$here/../support
: "${PREDROP_BIN:?}" "${PGHOST:?}" "${PGPORT:?}"
work=$(mktemp -d /tmp/predrop-reload.XXXXXX)
db="reload_$$_$RANDOM"
pid=""
cleanup() {
  [ -n "$pid" ] && "$support/stop-predrop.sh" "$pid" >/dev/null 2>&1 || true
  psql -qX -h "$PGHOST" -p "$PGPORT" -U postgres -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; [ -n "${PREDROP_LOG:-}" ] && tail -20 "$PREDROP_LOG" >&2; exit 1; }
psql -qX -h "$PGHOST" -p "$PGPORT" -U postgres -d postgres -c "CREATE DATABASE $db" >/dev/null
pgbench -q -i -s 1 -h "$PGHOST" -p "$PGPORT" -U postgres "$db" >/dev/null 2>&1
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
admin=$(free_port)
conf=$work/predrop.yaml
printf 'snapshots:\n  hold_timeout_ms: 2000\n' >"$conf"
conn="host=$PGHOST port=$PGPORT user=postgres"
eval "$("$support/start-predrop.sh" "$work/p" --config "$conf" --capture "$conn" --store "$conn dbname=$db" --admin "127.0.0.1:$admin")"
pid=$PREDROP_PID

pgbench -n -c 50 -j 2 -T 8 -h 127.0.0.1 -p "$PREDROP_PORT" -U postgres "$db" >"$work/pgbench.txt" 2>&1 &
bench=$!
sleep 2
# A valid change: skip schema "public" from now on.
printf 'snapshots:\n  hold_timeout_ms: 1500\nrules:\n  - schema: "public"\n    action: skip\n' >"$conf"
kill -HUP "$pid"
sleep 1
# A broken file (a typo'd key): must be refused, the previous policy kept.
printf 'snapshots:\n  hold_timout_ms: 10\n' >"$conf"
kill -HUP "$pid"
sleep 1
wait "$bench" || fail "pgbench through predrop failed during reloads: $(tail -5 "$work/pgbench.txt")"
grep -q "number of failed transactions: 0" "$work/pgbench.txt" || fail "failed transactions: $(grep failed "$work/pgbench.txt")"

metric() { curl -fsS "http://127.0.0.1:$admin/metrics" | awk -v k="$1" '$1 == k { print $2 }'; }
[ "$(metric 'predrop_config_reloads_total{result="ok"}')" = 1 ] || fail "valid reload not counted"
[ "$(metric 'predrop_config_reloads_total{result="failed"}')" = 1 ] || fail "broken reload not counted as failed"
grep -q "hold_timout_ms" "$PREDROP_LOG" || fail "the refused reload's error is not logged"
# The kept policy is the valid one: public is skipped.
psql -qXAt -h 127.0.0.1 -p "$PREDROP_PORT" -U postgres -d "$db" -c "CREATE TABLE gone(a int)" -c "DROP TABLE gone"
sleep 0.5
[ "$(metric 'predrop_snapshots_total{outcome="policy_skip"}')" -ge 1 ] || fail "the reloaded rule is not in force"
n=$(psql -qXAt -h "$PGHOST" -p "$PGPORT" -U postgres -d "$db" -c "SELECT count(*) FROM predrop.schema_snapshots WHERE table_name = 'gone'")
[ "$n" = 0 ] || fail "a skipped table was snapshotted"

# A reload reaches the capture settings and the log level, and keeps restart-only keys: dedup on,
# an enrichment query that fails (logged at debug level only), a pool size that needs a restart.
cat >"$conf" <<'YAML'
logging:
  level: debug
capture:
  pool_size: 7
snapshots:
  dedup_window_s: 3600
enrichment:
  identity_sql: "SELECT no_such_column"
YAML
kill -HUP "$pid"
for _ in $(seq 50); do [ "$(metric 'predrop_config_reloads_total{result="ok"}')" = 2 ] && break; sleep 0.2; done
[ "$(metric 'predrop_config_reloads_total{result="ok"}')" = 2 ] || fail "third reload not counted"
grep -q "capture.pool_size changed in the file; the running value is kept" "$PREDROP_LOG" \
  || fail "the reload does not say that capture.pool_size needs a restart"
before=$(metric 'predrop_snapshots_total{outcome="deduplicated"}')
through() { psql -qXAt -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PREDROP_PORT" -U postgres -d "$db" "$@"; }
through -c "CREATE TABLE twice(a int)" -c "DROP TABLE twice"
through -c "CREATE TABLE twice(a int)" -c "DROP TABLE twice"
[ "$(metric 'predrop_snapshots_total{outcome="deduplicated"}')" = $((before + 1)) ] \
  || fail "snapshots.dedup_window_s from the reload is not in force"
grep -q "enrichment query failed" "$PREDROP_LOG" \
  || fail "enrichment.identity_sql or logging.level from the reload is not in force"
echo "reload under load: ok ($(grep -E '^tps' "$work/pgbench.txt"))"
