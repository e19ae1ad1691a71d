#!/usr/bin/env bash
# After-capture benchmarks (no assertions): CREATE/INSERT/DROP churn through predrop with capture.after
# on vs off (direct and PgBouncer for reference), commit-to-after-NOTIFY latency (spaced and burst),
# and the statistics watcher's cost with 1,000 afters waiting. See after_bench.py.
#
#   run-after-bench.sh     inside `make bench` (scripts/bench.sh sets PGHOST/PGPORT, PGB_PORT, BENCH_WORK)
#                          or alone: without PGHOST it starts a throwaway cluster, without PGB_PORT a
#                          PgBouncer, and stops them at the end (PREDROP_BIN defaults to build/cli/predrop)
#
# Tunables: AFTER_BENCH_SECONDS (8), AFTER_BENCH_CLIENTS (8), AFTER_BENCH_REPS (5),
# AFTER_BENCH_SAMPLES (200), AFTER_BENCH_SPACING_MS (30), AFTER_BENCH_WAITING (1000),
# AFTER_BENCH_POLL_MS (500), AFTER_BENCH_WATCH_S (10), AFTER_BENCH_SKIP (words of: churn latency stats),
# AFTER_BENCH_KEEP=1 (alone: keep the predrop logs).
# Writes $BENCH_WORK/after-results.tsv (section, metric, value) when BENCH_WORK is set.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
export PREDROP_BIN=${PREDROP_BIN:-$root/build/cli/predrop}
[ -x "$PREDROP_BIN" ] || { echo "after bench: $PREDROP_BIN not built" >&2; exit 1; }

own_work="" own_pgb=""
cleanup() {
  [ -n "$own_pgb" ] && "$root/tests/bench/pgbouncer.sh" stop "$own_pgb" || true
  if [ -n "$own_work" ]; then
    "$root/scripts/pg-cluster.sh" stop "$own_work/pg" >/dev/null 2>&1 || true
    rm -rf "$own_work"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ -z "${PGHOST:-}" ] || [ -z "${PGPORT:-}" ]; then
  own_work=$(mktemp -d /tmp/predrop-after-bench.XXXXXX)
  chmod 0755 "$own_work"
  "$root/scripts/pg-cluster.sh" start "$own_work/pg" >/dev/null
  set -a; . "$own_work/pg/env"; set +a
  echo "after bench: cluster in $own_work/pg"
fi
if [ -z "${PGB_PORT:-}" ] && command -v pgbouncer >/dev/null; then
  eval "$("$root/tests/bench/pgbouncer.sh" start "${own_work:-${BENCH_WORK:-/tmp}}" "$PGPORT")"
  own_pgb=$PGB_PID
  export PGB_PORT
fi
export PGUSER=postgres
unset PGPASSWORD PGOPTIONS PGDATABASE PGSERVICE
PATH=${PG_CLIENT_BIN:-/usr/lib/postgresql/15/bin}:$PATH
/usr/bin/python3 "$here/after_bench.py"
