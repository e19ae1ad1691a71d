#!/usr/bin/env bash
# Hold benchmarks (no assertions): one-table DROP hold time p50/p99 over ~200 drops of small analysed
# tables, a 300-table DROP SCHEMA ... CASCADE (a few repetitions), and pgbench tpcb-like (nothing
# destructive) through predrop with holds enabled vs the relay alone. See hold_bench.py.
#
#   run-hold-bench.sh            against the cluster in PGHOST/PGPORT (superuser postgres, trust)
#
# Needs PREDROP_BIN; starts and stops its own predrop instances and databases. Tunables:
# HOLD_BENCH_DROPS (200), HOLD_BENCH_CASCADE_TABLES (300), HOLD_BENCH_CASCADE_REPS (3),
# HOLD_BENCH_SECONDS (10), HOLD_BENCH_CLIENTS (8), HOLD_BENCH_MODES ("simple prepared"),
# HOLD_BENCH_REPS (2), HOLD_BENCH_SCALE (5), HOLD_BENCH_SKIP (words of: one_table cascade pgbench).
# Writes $BENCH_WORK/hold-results.tsv (section, metric, value) when BENCH_WORK is set.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
: "${PGHOST:?PGHOST unset}" "${PGPORT:?PGPORT unset}" "${PREDROP_BIN:?PREDROP_BIN unset}"
export PREDROP_SOURCE_DIR=${PREDROP_SOURCE_DIR:-$(cd "$here/../../.." && pwd)}
exec /usr/bin/python3 "$here/hold_bench.py"
