#!/usr/bin/env bash
# The admin endpoint against a live predrop that intercepted drops of several outcomes:
# /metrics passes `promtool check metrics` and counts each outcome; /healthz, /readyz and /drops answer.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
support=$here/../support
: "${PREDROP_BIN:?}" "${PGHOST:?}" "${PGPORT:?}"
work=$(mktemp -d /tmp/predrop-metrics.XXXXXX)
db="metrics_$$_$RANDOM"
pids=()
cleanup() {
  for p in "${pids[@]}"; do "$support/stop-predrop.sh" "$p" >/dev/null 2>&1 || true; done
  psql -qX -h "$PGHOST" -p "$PGPORT" -U postgres -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v promtool >/dev/null || fail "promtool missing: install Debian package prometheus (scripts/install-deps.sh does)"

sql() { psql -qXAt -v ON_ERROR_STOP=1 -h "$PGHOST" -p "$PGPORT" -U postgres -d "$db" "$@"; }
psql -qX -h "$PGHOST" -p "$PGPORT" -U postgres -d postgres -c "CREATE DATABASE $db" >/dev/null
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
admin=$(free_port)
cat >"$work/predrop.yaml" <<YAML
snapshots:
  dedup_window_s: 3600
rules:
  - schema: "skipme"
    action: skip
default:
  action: snapshot
  on_failure: open
YAML
conn="host=$PGHOST port=$PGPORT user=postgres"
eval "$("$support/start-predrop.sh" "$work/a" --config "$work/predrop.yaml" --capture "$conn" \
        --store "$conn dbname=$db" --admin "127.0.0.1:$admin" --hold-timeout-ms 800)"
pids+=("$PREDROP_PID")
through() { psql -qXAt -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PREDROP_PORT" -U postgres -d "$db" "$@"; }

# written, then deduplicated (same table, same shape, inside the window)
through -c "CREATE TABLE w(a int, b text)" -c "DROP TABLE w"
through -c "CREATE TABLE w(a int, b text)" -c "DROP TABLE w"
# policy_skip
through -c "CREATE SCHEMA skipme" -c "CREATE TABLE skipme.t(a int)" -c "DROP TABLE skipme.t"
# table_missing: created in the client's open transaction, invisible to predrop's connection
through -c "BEGIN; CREATE TABLE fresh(a int); DROP TABLE fresh; COMMIT;"
# timeout: the store sleeps longer than the hold
sql -c "CREATE FUNCTION slow() RETURNS trigger LANGUAGE plpgsql AS \$\$BEGIN PERFORM pg_sleep(3); RETURN NEW; END\$\$" \
    -c "CREATE TRIGGER slow BEFORE INSERT ON predrop.schema_snapshots FOR EACH ROW EXECUTE FUNCTION slow()"
through -c "CREATE TABLE slowpoke(a int)" -c "DROP TABLE slowpoke"
sql -c "DROP TRIGGER slow ON predrop.schema_snapshots"
# unresolved risk
through -c "DO \$\$BEGIN EXECUTE 'CREATE TABLE dyn(a int)'; END\$\$"
sleep 1

curl -fsS "http://127.0.0.1:$admin/metrics" >"$work/metrics.txt" || fail "/metrics did not answer"
promtool check metrics <"$work/metrics.txt" || fail "promtool check metrics rejected /metrics"
value() { awk -v k="$1" '$1 == k { print $2 }' "$work/metrics.txt"; }
for outcome in written deduplicated policy_skip table_missing timeout; do
  v=$(value "predrop_snapshots_total{outcome=\"$outcome\"}")
  [ -n "$v" ] && [ "${v%.*}" -ge 1 ] || fail "predrop_snapshots_total{outcome=\"$outcome\"} is '$v', want >= 1"
done
[ "$(value 'predrop_intercepted_statements_total{kind="drop_table"}')" -ge 5 ] || fail "drop_table intercepts not counted"
[ "$(value 'predrop_unresolved_statements_total')" -ge 1 ] || fail "unresolved statement not counted"
[ "$(value 'predrop_drop_outcomes_total{outcome="dropped"}')" -ge 1 ] || fail "drop outcome not confirmed"
grep -q '^predrop_hold_duration_seconds_count ' "$work/metrics.txt" || fail "hold histogram missing"
grep -q '^process_resident_memory_bytes ' "$work/metrics.txt" || fail "process metrics missing"
grep -q '^predrop_build_info{version="' "$work/metrics.txt" || fail "build info missing"

[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$admin/healthz")" = 200 ] || fail "/healthz not 200"
[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$admin/readyz")" = 200 ] || fail "/readyz not 200"
curl -fsS "http://127.0.0.1:$admin/drops?limit=3" | /usr/bin/python3 -c '
import json, sys
rows = json.load(sys.stdin)
assert isinstance(rows, list) and 1 <= len(rows) <= 3, rows
assert all("outcome" in r for r in rows), rows'  || fail "/drops did not return ledger rows"
[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$admin/drops?limit=x")" = 400 ] || fail "/drops?limit=x not 400"

# readiness says why when the store is gone: a second instance whose store is a closed port
dead=$(free_port)
admin2=$(free_port)
eval "$("$support/start-predrop.sh" "$work/b" --capture "$conn" --store "host=127.0.0.1 port=$dead user=postgres" \
        --no-migrate --admin "127.0.0.1:$admin2")"
pids+=("$PREDROP_PID")
code=$(curl -s -o "$work/readyz.txt" -w '%{http_code}' "http://127.0.0.1:$admin2/readyz")
[ "$code" = 503 ] || fail "/readyz with the store down answered $code"
grep -q "store" "$work/readyz.txt" || fail "/readyz 503 does not say why: $(cat "$work/readyz.txt")"

echo "--- /metrics (predrop_ lines) ---"
grep '^predrop_' "$work/metrics.txt" | grep -v '_bucket'
echo "metrics endpoint: ok"
