#!/usr/bin/env bash
# The store as it grows: per-write time on an empty store and on one of 1,000,000 snapshots, and the
# bytes per snapshot of analysed 20-column tables (issue 21); see store_bench.py.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
: "${PGHOST:?PGHOST unset}" "${PGPORT:?PGPORT unset}" "${PREDROP_BIN:?PREDROP_BIN unset}"
export PREDROP_SOURCE_DIR=${PREDROP_SOURCE_DIR:-$(cd "$here/../../.." && pwd)}
exec /usr/bin/python3 "$here/store_bench.py"
