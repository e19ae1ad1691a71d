#!/usr/bin/env bash
# node-postgres (pg, pinned in node/package-lock.json) direct vs through predrop, with node:test.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
[ -n "${PGHOST:-}" ] && [ -n "${PGPORT:-}" ] || { echo "FAIL: PGHOST/PGPORT unset (run through scripts/test.sh, or source the env file scripts/pg-cluster.sh start writes)"; exit 1; }
command -v node >/dev/null && command -v npm >/dev/null || { echo "FAIL: node/npm not installed (scripts/install-deps.sh installs them)"; exit 1; }
export PGUSER=${PGUSER:-postgres} PGDATABASE=${PGDATABASE:-postgres}
unset PGPASSWORD PGSSLMODE PGOPTIONS
cd "$here/node"
# Installed by the ctest fixture node_modules (tests/support/node-modules.sh), never here: the hold
# tests load the same modules, and two installs at once break each other.
[ -f node_modules/pg/package.json ] || {
  echo "FAIL: $here/node/node_modules/pg missing: run through ctest (fixture support.node_modules) or tests/support/node-modules.sh $here/node"
  exit 1
}
exec node --test --test-reporter=spec pg.test.mjs
