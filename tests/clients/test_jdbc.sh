#!/usr/bin/env bash
# pgjdbc (Debian's libpostgresql-jdbc-java, run by Java's single-file source launcher) direct vs
# through predrop: the transcripts of tests/clients/jdbc/JdbcClients.java must be identical, and
# each run's own checks must hold.
set -euo pipefail
. "$(dirname "$0")/../support/test-lib.sh"
tl_init jdbc
here=$(cd "$(dirname "$0")" && pwd)
jar=/usr/share/java/postgresql.jar
if ! command -v java >/dev/null || [ ! -r "$jar" ]; then
  tl_fail "java or $jar missing (scripts/install-deps.sh installs openjdk-17-jdk-headless and libpostgresql-jdbc-java)"
  tl_finish
fi
tl_start_predrop
run() {  # PORT NAME
  tl_recreate_db cl_jdbc
  if java -cp "$jar" "$here/jdbc/JdbcClients.java" "$PGHOST" "$1" "$PGUSER" >"$TL_WORK/$2.txt" 2>"$TL_WORK/$2.err"; then
    tl_ok "$2 run: $(grep -c '^check ok' "$TL_WORK/$2.txt") checks held, $(wc -l <"$TL_WORK/$2.txt") lines"
  else
    tl_fail "$2 run failed: $(grep -h 'CHECK FAILED' "$TL_WORK/$2.txt"; tail -n 20 "$TL_WORK/$2.err")"
  fi
}
run "$PGPORT" direct
run "$PREDROP_PORT" predrop
tl_compare "pgjdbc transcript" "$TL_WORK/direct.txt" "$TL_WORK/predrop.txt"
tl_predrop_alive || tl_fail "predrop died"
tl_drop_db cl_jdbc
tl_finish
