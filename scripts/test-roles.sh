#!/usr/bin/env bash
# Roles the tests authenticate as: one SCRAM-SHA-256 and one md5 user (pg_hba.conf of pg-cluster.sh matches them).
set -euo pipefail
psql -v ON_ERROR_STOP=1 -qAt -h "$PGHOST" -p "$PGPORT" -U postgres -d postgres <<'SQL' >/dev/null
SET client_min_messages = warning;
SET password_encryption = 'scram-sha-256';
CREATE ROLE scram_user LOGIN SUPERUSER PASSWORD 'scram-secret';
SET password_encryption = 'md5';
CREATE ROLE md5_user LOGIN SUPERUSER PASSWORD 'md5-secret';
SQL
