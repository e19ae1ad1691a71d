#!/usr/bin/env bash
# The recreate cycle through predrop against direct and PgBouncer (issue 21); see churn_bench.py.
#   run-churn-bench.sh     against the cluster in PGHOST/PGPORT (superuser postgres, trust)
# Needs PREDROP_BIN; PGB_PORT (scripts/bench.sh) adds PgBouncer's cells. Writes
# $BENCH_WORK/churn-results.tsv when BENCH_WORK is set.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
: "${PGHOST:?PGHOST unset}" "${PGPORT:?PGPORT unset}" "${PREDROP_BIN:?PREDROP_BIN unset}"
export PREDROP_SOURCE_DIR=${PREDROP_SOURCE_DIR:-$(cd "$here/../../.." && pwd)}
exec /usr/bin/python3 "$here/churn_bench.py"
