#!/usr/bin/env bash
# libpq direct vs through predrop: PQexecParams, PQprepare/PQexecPrepared, pipeline mode (with an
# error in the middle), LISTEN/NOTIFY between two connections, PQcancel, COPY 100 MB both ways.
# libpq_client prints a transcript (no PIDs, no timings) and checks what needs no comparison itself.
set -euo pipefail
. "$(dirname "$0")/../support/test-lib.sh"
tl_init libpq
: "${LIBPQ_CLIENT:?LIBPQ_CLIENT unset: path of the libpq_client test program}"
db=cl_libpq
tl_start_predrop

run_side() {  # run_side SIDE PORT
  local side=$1 port=$2
  tl_recreate_db "$db"
  local rc=0
  "$LIBPQ_CLIENT" "host=$PGHOST port=$port dbname=$db user=$PGUSER sslmode=disable application_name=libpq_client" \
    >"$TL_WORK/$side.out" 2>"$TL_WORK/$side.err" || rc=$?
  echo "libpq_client exit status $rc" >>"$TL_WORK/$side.out"
  sed "s/^/  $side: /" "$TL_WORK/$side.err"
}

run_side direct "$PGPORT"
run_side predrop "$PREDROP_PORT"
tl_drop_db "$db"
tl_compare "libpq transcript" "$TL_WORK/direct.out" "$TL_WORK/predrop.out"
tl_expect "libpq_client through predrop: own checks" "libpq_client exit status 0" "$(tail -n 1 "$TL_WORK/predrop.out")"
grep -q '^=== misc' "$TL_WORK/predrop.out" || tl_fail "libpq transcript through predrop did not reach the last scenario"
grep '^CHECK FAILED' "$TL_WORK/predrop.out" | sed 's/^/  predrop: /' || true
tl_predrop_alive || tl_fail "predrop died during the test"
tl_finish
