#!/usr/bin/env bash
# The connections 20 sidecars hold against one server, idle and under churn (issue 21); see
# fleet_bench.py. Needs PGHOST/PGPORT (superuser postgres, trust) and PREDROP_BIN.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
: "${PGHOST:?PGHOST unset}" "${PGPORT:?PGPORT unset}" "${PREDROP_BIN:?PREDROP_BIN unset}"
export PREDROP_SOURCE_DIR=${PREDROP_SOURCE_DIR:-$(cd "$here/../../.." && pwd)}
exec /usr/bin/python3 "$here/fleet_bench.py"
