#!/usr/bin/env bash
# `make test`: start a throwaway PostgreSQL, run every ctest test against it, stop it whatever happens.
set -euo pipefail
BUILD_DIR=${1:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/predrop-test.XXXXXX)
chmod 0755 "$work"
cleanup() { "$root/scripts/pg-cluster.sh" stop "$work/pg" || true; }
trap cleanup EXIT
"$root/scripts/pg-cluster.sh" start "$work/pg" >/dev/null
set -a; . "$work/pg/env"; set +a
export PREDROP_TEST_WORKDIR="$work"
"$root/scripts/test-roles.sh"
cd "$BUILD_DIR"
ctest --output-on-failure -j "${CTEST_JOBS:-2}" ${CTEST_ARGS:-}
