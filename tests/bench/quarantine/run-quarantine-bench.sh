#!/usr/bin/env bash
# Quarantine benchmarks (no assertions): the client's time of a quarantined DROP TABLE of a large table
# against a real DROP of the same table (direct, and through predrop holding it for its snapshot),
# and the purge's throughput. See quarantine_bench.py.
#
#   run-quarantine-bench.sh   inside `make bench` (scripts/bench.sh sets PGHOST/PGPORT, BENCH_WORK)
#                             or alone: without PGHOST it starts a throwaway cluster and stops it at
#                             the end (PREDROP_BIN defaults to build/cli/predrop)
#
# Tunables: QUARANTINE_BENCH_MB (1024: the table's size), QUARANTINE_BENCH_REPS (2),
# QUARANTINE_BENCH_PURGE_TABLES (200).
# Writes $BENCH_WORK/quarantine-results.tsv (section, metric, value) when BENCH_WORK is set.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
export PREDROP_BIN=${PREDROP_BIN:-$root/build/cli/predrop}
[ -x "$PREDROP_BIN" ] || { echo "quarantine bench: $PREDROP_BIN not built" >&2; exit 1; }

own_work=""
cleanup() {
  if [ -n "$own_work" ]; then
    "$root/scripts/pg-cluster.sh" stop "$own_work/pg" >/dev/null 2>&1 || true
    rm -rf "$own_work"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ -z "${PGHOST:-}" ] || [ -z "${PGPORT:-}" ]; then
  own_work=$(mktemp -d /tmp/predrop-quarantine-bench.XXXXXX)
  chmod 0755 "$own_work"
  "$root/scripts/pg-cluster.sh" start "$own_work/pg" >/dev/null
  set -a; . "$own_work/pg/env"; set +a
  echo "quarantine bench: cluster in $own_work/pg"
fi
export PGUSER=postgres
unset PGPASSWORD PGOPTIONS PGDATABASE PGSERVICE
PATH=${PG_CLIENT_BIN:-/usr/lib/postgresql/15/bin}:$PATH
/usr/bin/python3 "$here/quarantine_bench.py"
