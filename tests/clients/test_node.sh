#!/usr/bin/env bash
# node-postgres (pg, pinned in node/package-lock.json) direct vs through predrop, with node:test.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
[ -n "${PGHOST:-}" ] && [ -n "${PGPORT:-}" ] || { echo "FAIL: PGHOST/PGPORT unset (run through scripts/test.sh, or source the env file scripts/pg-cluster.sh start writes)"; exit 1; }
command -v node >/dev/null && command -v npm >/dev/null || { echo "FAIL: node/npm not installed (scripts/install-deps.sh installs them)"; exit 1; }
export PGUSER=${PGUSER:-postgres} PGDATABASE=${PGDATABASE:-postgres}
unset PGPASSWORD PGSSLMODE PGOPTIONS
cd "$here/node"
if [ ! -d node_modules/pg ]; then
  echo "# npm ci --prefer-offline (node_modules missing)"
  npm ci --prefer-offline --no-audit --no-fund --loglevel=error
fi
exec node --test --test-reporter=spec pg.test.mjs
