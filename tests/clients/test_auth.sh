#!/usr/bin/env bash
# Password authentication through predrop: SCRAM-SHA-256 (scram_user) and md5 (md5_user), created by
# scripts/test-roles.sh and forced by pg_hba on 127.0.0.1. Right passwords work; wrong or missing ones
# show the server's own error text, identical to a direct connection.
set -euo pipefail
. "$(dirname "$0")/../support/test-lib.sh"
tl_init auth
tl_start_predrop

attempt() {  # attempt PORT USER PASSWORD|- [extra conninfo]
  local port=$1 user=$2 pw=$3 extra=${4:-}
  local conn="host=$PGHOST port=$port dbname=postgres user=$user sslmode=disable $extra"
  echo "--- user=$user password=$pw $extra"
  if [ "$pw" = - ]; then
    env -u PGPASSWORD psql -X -w -Atc "SELECT current_user, session_user, 'authenticated'" "$conn" 2>&1 || echo "exit status $?"
  else
    PGPASSWORD=$pw psql -X -w -Atc "SELECT current_user, session_user, 'authenticated'" "$conn" 2>&1 || echo "exit status $?"
  fi
}

run_side() {  # run_side PORT
  local port=$1
  attempt "$port" scram_user scram-secret
  attempt "$port" scram_user wrong-secret
  attempt "$port" scram_user -
  attempt "$port" scram_user scram-secret "channel_binding=disable"
  attempt "$port" md5_user md5-secret
  attempt "$port" md5_user wrong-secret
  attempt "$port" md5_user -
  attempt "$port" md5_user md5-secret "dbname=no_such_db"
  attempt "$port" no_such_role anything
  attempt "$port" postgres -
  # Startup options ride in the StartupMessage through the authentication exchange.
  attempt "$port" scram_user scram-secret "options=-capplication_name=auth_test"
  # Several authentications in a row on one predrop (no state leaks between sessions).
  for i in 1 2 3; do
    attempt "$port" scram_user scram-secret
    attempt "$port" md5_user wrong-secret
  done
}

run_side "$PGPORT" >"$TL_WORK/direct.out"
run_side "$PREDROP_PORT" >"$TL_WORK/predrop.out"
tl_compare "authentication outcomes and error texts" "$TL_WORK/direct.out" "$TL_WORK/predrop.out"
# The test is only meaningful if both outcomes occurred.
n_ok=$(grep -c 'authenticated$' "$TL_WORK/predrop.out" || true)
n_fail=$(grep -c 'password authentication failed for user' "$TL_WORK/predrop.out" || true)
[ "$n_ok" -ge 6 ] || tl_fail "only $n_ok successful authentications through predrop"
[ "$n_fail" -ge 5 ] || tl_fail "only $n_fail rejected passwords through predrop"
grep -q 'scram_user|scram_user|authenticated' "$TL_WORK/predrop.out" || tl_fail "SCRAM login through predrop did not work"
grep -q 'md5_user|md5_user|authenticated' "$TL_WORK/predrop.out" || tl_fail "md5 login through predrop did not work"

# The auth method really is what pg_hba says (a misconfigured cluster would make the test vacuous).
tl_expect "scram_user's verifier is SCRAM" "SCRAM-SHA-256" \
  "$(psql -X -Atc "SELECT left(rolpassword, 13) FROM pg_authid WHERE rolname = 'scram_user'" -h "$PGHOST" -p "$PGPORT" -d postgres)"
tl_expect "md5_user's verifier is md5" "md5" \
  "$(psql -X -Atc "SELECT left(rolpassword, 3) FROM pg_authid WHERE rolname = 'md5_user'" -h "$PGHOST" -p "$PGPORT" -d postgres)"
tl_predrop_alive || tl_fail "predrop died during the test"
tl_finish
