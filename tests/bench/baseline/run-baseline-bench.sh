#!/usr/bin/env bash
# predrop baseline of analysed tables into an empty store, in tables/s (issue 21: >= 3,000 for 300
# analysed tables); see baseline_bench.py.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
: "${PGHOST:?PGHOST unset}" "${PGPORT:?PGPORT unset}" "${PREDROP_BIN:?PREDROP_BIN unset}"
export PREDROP_SOURCE_DIR=${PREDROP_SOURCE_DIR:-$(cd "$here/../../.." && pwd)}
exec /usr/bin/python3 "$here/baseline_bench.py"
