#!/usr/bin/env bash
# psycopg2 + SQLAlchemy + pandas direct vs through predrop (Debian's python3 packages: /usr/bin/python3,
# not whatever python3 is first on PATH).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
[ -n "${PGHOST:-}" ] && [ -n "${PGPORT:-}" ] || { echo "FAIL: PGHOST/PGPORT unset (run through scripts/test.sh, or source the env file scripts/pg-cluster.sh start writes)"; exit 1; }
export PGUSER=${PGUSER:-postgres} PGDATABASE=${PGDATABASE:-postgres}
unset PGPASSWORD PGSSLMODE PGOPTIONS
exec /usr/bin/python3 "$here/python/clients_test.py"
