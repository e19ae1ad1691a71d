#!/usr/bin/env bash
# The admin endpoint against a live predrop that intercepted drops of every snapshot outcome
# (written, deduplicated, policy_skip, table_missing, timeout, capture_error, store_error, disabled):
# /metrics passes `promtool check metrics` and counts each one; predrop_store_up goes 0 while the store
# refuses writes and back to 1 once it is repaired, with no restart; /healthz, /readyz and /drops answer.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
support=$here/../support
: "${PREDROP_BIN:?}" "${PGHOST:?}" "${PGPORT:?}"
work=$(mktemp -d /tmp/predrop-metrics.XXXXXX)
db="metrics_$$_$RANDOM"
nocap="${db}_nocap"              # a database predrop's capture role may not connect to
cap_role="predrop_cap_$$_$RANDOM"
pids=()
cleanup() {
  for p in "${pids[@]}"; do "$support/stop-predrop.sh" "$p" >/dev/null 2>&1 || true; done
  for d in "$db" "$nocap"; do
    psql -qX -h "$PGHOST" -p "$PGPORT" -U postgres -d postgres -c "DROP DATABASE IF EXISTS $d WITH (FORCE)" >/dev/null 2>&1 || true
  done
  psql -qX -h "$PGHOST" -p "$PGPORT" -U postgres -d postgres -c "DROP ROLE IF EXISTS $cap_role" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v promtool >/dev/null || fail "promtool missing: install Debian package prometheus (scripts/install-deps.sh does)"

sql() { psql -qXAt -v ON_ERROR_STOP=1 -h "$PGHOST" -p "$PGPORT" -U postgres -d "$db" "$@"; }
psql -qX -v ON_ERROR_STOP=1 -h "$PGHOST" -p "$PGPORT" -U postgres -d postgres \
  -c "CREATE DATABASE $db" -c "CREATE DATABASE $nocap" -c "REVOKE CONNECT ON DATABASE $nocap FROM PUBLIC" \
  -c "CREATE ROLE $cap_role LOGIN" >/dev/null
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
admin=$(free_port)
# The config is rewritten below (snapshots.enabled) and reloaded with SIGHUP.
write_config() {
  cat >"$work/predrop.yaml" <<YAML
store:
  check_interval_s: 1
snapshots:
  enabled: $1
  dedup_window_s: 3600
rules:
  - schema: "skipme"
    action: skip
default:
  action: snapshot
  on_failure: open
YAML
}
write_config true
conn="host=$PGHOST port=$PGPORT user=postgres"
# The capture role is an ordinary role (no superuser: it cannot bypass CONNECT on $nocap); the store
# is written as postgres.
eval "$("$support/start-predrop.sh" "$work/a" --config "$work/predrop.yaml" --capture "host=$PGHOST port=$PGPORT user=$cap_role" \
        --store "$conn dbname=$db" --admin "127.0.0.1:$admin" --hold-timeout-ms 800)"
pids+=("$PREDROP_PID")
through() { psql -qXAt -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PREDROP_PORT" -U postgres -d "$db" "$@"; }
scrape() { curl -fsS "http://127.0.0.1:$admin/metrics" >"$work/$1.txt" || fail "/metrics did not answer"; }
metric_in() { awk -v k="$2" '$1 == k { print $2 }' "$work/$1.txt"; }
# Polls /metrics until metric $1 equals $2 (up to $3 seconds); prints the seconds it took.
await_metric() {
  local start=$SECONDS
  while :; do
    scrape poll
    [ "$(metric_in poll "$1")" = "$2" ] && { echo $((SECONDS - start)); return 0; }
    [ $((SECONDS - start)) -lt "$3" ] || fail "$1 is '$(metric_in poll "$1")' after ${3}s, want $2"
    sleep 0.2
  done
}
t=$(await_metric predrop_store_up 1 10)
echo "predrop_store_up 1 after start (${t}s)"

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
# capture_error: the capture role may not connect to the client's database
psql -qXAt -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PREDROP_PORT" -U postgres -d "$nocap" \
  -c "CREATE TABLE uncapturable(a int)" -c "DROP TABLE uncapturable"
[ "$(psql -qXAt -h "$PGHOST" -p "$PGPORT" -U postgres -d "$nocap" -c "SELECT to_regclass('uncapturable') IS NULL")" = t ] \
  || fail "the drop did not go ahead after capture_error (on_failure: open)"

# store_error: the snapshot table is renamed away; the write fails, predrop_store_up turns 0 and the
# periodic check (every second here) keeps it 0 while no snapshot is written.
sql -c "ALTER TABLE predrop.schema_snapshots RENAME TO schema_snapshots_away"
through -c "CREATE TABLE storeless(a int)" -c "DROP TABLE storeless"
t=$(await_metric predrop_store_up 0 10)
echo "predrop_store_up 0 ${t}s after the failed snapshot write"
scrape broken
success_before=$(metric_in broken predrop_store_last_success_timestamp_seconds)
sleep 3
scrape broken_later
[ "$(metric_in broken_later predrop_store_up)" = 0 ] || fail "predrop_store_up went back to 1 while the store is still broken"
[ "$(metric_in broken_later predrop_store_last_success_timestamp_seconds)" = "$success_before" ] \
  || fail "predrop_store_last_success_timestamp_seconds moved while the store was broken"
grep -q "store not writable" "$PREDROP_LOG" || fail "the broken store is not logged"
# repaired: the check thread finds it writable again, with no snapshot written and no restart
sql -c "ALTER TABLE predrop.schema_snapshots_away RENAME TO schema_snapshots"
t=$(await_metric predrop_store_up 1 20)
echo "predrop_store_up back to 1 ${t}s after the repair"
scrape repaired
awk -v a="$(metric_in repaired predrop_store_last_success_timestamp_seconds)" -v b="$success_before" 'BEGIN { exit !(a > b) }' \
  || fail "predrop_store_last_success_timestamp_seconds did not advance after the repair"
kill -0 "$PREDROP_PID" || fail "predrop is gone"
through -c "CREATE TABLE after_repair(a int, z text)" -c "DROP TABLE after_repair"
# (its befores: the CREATE's after is a row of its own)
[ "$(sql -c "SELECT count(*) FROM predrop.schema_snapshots WHERE table_name = 'after_repair' AND reason = 'pre_drop'")" = 1 ] \
  || fail "no snapshot written after the store was repaired"

# disabled: a SIGHUP reload turns snapshots off; the drop is relayed and counted, not held
write_config false
kill -HUP "$PREDROP_PID"
await_metric 'predrop_config_reloads_total{result="ok"}' 1 10 >/dev/null
through -c "CREATE TABLE unheld(a int)" -c "DROP TABLE unheld"
[ "$(sql -c "SELECT count(*) FROM predrop.schema_snapshots WHERE table_name = 'unheld'")" = 0 ] \
  || fail "a snapshot was written with snapshots.enabled: false"
sleep 1

curl -fsS "http://127.0.0.1:$admin/metrics" >"$work/metrics.txt" || fail "/metrics did not answer"
promtool check metrics <"$work/metrics.txt" || fail "promtool check metrics rejected /metrics"
value() { awk -v k="$1" '$1 == k { print $2 }' "$work/metrics.txt"; }
for outcome in written deduplicated policy_skip table_missing timeout capture_error store_error disabled; do
  v=$(value "predrop_snapshots_total{outcome=\"$outcome\"}")
  [ -n "$v" ] && [ "${v%.*}" -ge 1 ] || fail "predrop_snapshots_total{outcome=\"$outcome\"} is '$v', want >= 1"
done
[ "$(value 'predrop_intercepted_statements_total{kind="drop_table"}')" -ge 9 ] || fail "drop_table intercepts not counted"
[ "$(value 'predrop_unresolved_statements_total')" -ge 1 ] || fail "unresolved statement not counted"
[ "$(value 'predrop_drop_outcomes_total{outcome="dropped"}')" -ge 1 ] || fail "drop outcome not confirmed"
grep -q '^predrop_hold_duration_seconds_count ' "$work/metrics.txt" || fail "hold histogram missing"
# Every phase of a written snapshot was observed, and the phases of a capture add up to no more
# than its duration.
for phase in capture_wait catalog store_wait store_write; do
  v=$(value "predrop_capture_phase_seconds_count{phase=\"$phase\"}")
  [ -n "$v" ] && [ "$v" -ge 1 ] || fail "predrop_capture_phase_seconds_count{phase=\"$phase\"} is '$v', want >= 1"
done
awk '$1 ~ /^predrop_capture_phase_seconds_sum[{]/ { phases += $2 } $1 == "predrop_capture_duration_seconds_sum" { whole = $2 }
     END { exit !(phases > 0 && phases <= whole + 1e-6) }' "$work/metrics.txt" \
  || fail "the capture phases' sums do not fit in predrop_capture_duration_seconds_sum"
grep -q '^process_resident_memory_bytes ' "$work/metrics.txt" || fail "process metrics missing"
grep -q '^predrop_build_info{version="' "$work/metrics.txt" || fail "build info missing"
[ "$(value predrop_store_up)" = 1 ] || fail "predrop_store_up is not 1 at the end"
for outcome in capture_error store_error disabled; do
  n=$(sql -c "SELECT count(*) FROM predrop.drop_events WHERE outcome = '$outcome'")
  [ "$n" -ge 1 ] || fail "no ledger row with outcome $outcome"
done

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
