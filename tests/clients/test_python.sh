#!/usr/bin/env bash
# psycopg2 + SQLAlchemy + pandas direct vs through predrop (Debian's python3 packages: /usr/bin/python3,
# not whatever python3 is first on PATH).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
[ -n "${PGHOST:-}" ] && [ -n "${PGPORT:-}" ] || { echo "SKIP: PGHOST/PGPORT unset"; exit 77; }
export PGUSER=${PGUSER:-postgres} PGDATABASE=${PGDATABASE:-postgres}
unset PGPASSWORD PGSSLMODE PGOPTIONS
exec /usr/bin/python3 "$here/python/clients_test.py"
