#!/usr/bin/env bash
# pg_dump | pg_restore through predrop: a schema dumped directly and through predrop must give the same
# dump (ignoring header comments and timestamps); restoring through predrop and dumping that directly
# must give the same again. Plain and custom formats; -j parallel dump (several connections) too.
set -euo pipefail
. "$(dirname "$0")/../support/test-lib.sh"
tl_init pg_dump
here=$(cd "$(dirname "$0")" && pwd)
src=cl_dump_src dst_direct=cl_dump_dst_direct dst_proxy=cl_dump_dst_proxy
tl_start_predrop

for db in "$src" "$dst_direct" "$dst_proxy"; do tl_drop_db "$db"; done   # leftovers of an aborted run
tl_admin "DROP ROLE IF EXISTS cl_dump_reader"
tl_recreate_db "$src"
psql -X -q -v ON_ERROR_STOP=1 -h "$PGHOST" -p "$PGPORT" -d "$src" -f "$here/pg_dump/schema.sql" >"$TL_WORK/load.out" 2>&1 \
  || { cat "$TL_WORK/load.out"; tl_fail "loading the schema failed"; tl_finish; }

# Strip what legitimately differs run to run: header comments, "Started on"/"Completed on", and the
# random \restrict key pg_dump 15.14+ writes.
clean() { grep -vE '^-- (Dumped (from|by)|Started on|Completed on)|^\\(un)?restrict ' "$1" || true; }

dump_all() {  # dump_all SIDE PORT
  local side=$1 port=$2 d="$TL_WORK/$1"
  mkdir -p "$d"
  pg_dump -h "$PGHOST" -p "$port" -d "$src" -f "$d/plain.sql" 2>"$d/plain.err" || echo "pg_dump plain exit status $?" >>"$d/plain.err"
  pg_dump -h "$PGHOST" -p "$port" -d "$src" -Fc -f "$d/custom.dump" 2>"$d/custom.err" || echo "pg_dump -Fc exit status $?" >>"$d/custom.err"
  pg_dump -h "$PGHOST" -p "$port" -d "$src" -Fd -j 3 -f "$d/dir" 2>"$d/dir.err" || echo "pg_dump -Fd -j3 exit status $?" >>"$d/dir.err"
  pg_dump -h "$PGHOST" -p "$port" -d "$src" -n shop --inserts --rows-per-insert=100 -f "$d/inserts.sql" 2>"$d/inserts.err" || echo "pg_dump --inserts exit status $?" >>"$d/inserts.err"
  pg_dump -h "$PGHOST" -p "$port" -d "$src" --schema-only -n shop -f "$d/schema.sql" 2>>"$d/plain.err" || echo "pg_dump -s exit status $?" >>"$d/plain.err"
  # Custom/directory dumps are binary with timestamps; compare what pg_restore makes of them.
  pg_restore -f "$d/custom.sql" "$d/custom.dump" 2>>"$d/custom.err" || echo "pg_restore -f exit status $?" >>"$d/custom.err"
  pg_restore -f "$d/dir.sql" "$d/dir" 2>>"$d/dir.err" || echo "pg_restore -f dir exit status $?" >>"$d/dir.err"
  pg_restore -l "$d/custom.dump" | grep -v '^;' | sed -E 's/^[0-9]+; //' >"$d/custom.toc" 2>>"$d/custom.err" || true
  local f
  for f in plain custom dir inserts schema; do clean "$d/$f.sql" >"$d/$f.clean"; done
  cat "$d"/*.err >"$d/errors" 2>/dev/null || true
}

dump_all direct "$PGPORT"
dump_all predrop "$PREDROP_PORT"
for f in plain custom dir inserts schema; do
  tl_compare "pg_dump $f" "$TL_WORK/direct/$f.clean" "$TL_WORK/predrop/$f.clean"
done
tl_compare "pg_dump TOC" "$TL_WORK/direct/custom.toc" "$TL_WORK/predrop/custom.toc"
tl_compare "pg_dump/pg_restore messages" "$TL_WORK/direct/errors" "$TL_WORK/predrop/errors"
lines=$(wc -l <"$TL_WORK/predrop/plain.clean")
[ "$lines" -gt 20000 ] || tl_fail "the dump through predrop is suspiciously short ($lines lines)"

# Restore: the direct custom dump into a fresh database, once directly and once through predrop
# (COPY FROM STDIN, CREATE INDEX, ... over the proxy; -j 2 uses several connections), then dump both
# directly and compare.
restore() {  # restore PORT DB
  tl_recreate_db "$2"
  pg_restore -h "$PGHOST" -p "$1" -d "$2" -j 2 --exit-on-error "$TL_WORK/direct/custom.dump" 2>&1 || echo "pg_restore exit status $?"
}
restore "$PGPORT" "$dst_direct" >"$TL_WORK/restore-direct.out"
restore "$PREDROP_PORT" "$dst_proxy" >"$TL_WORK/restore-predrop.out"
tl_compare "pg_restore messages" "$TL_WORK/restore-direct.out" "$TL_WORK/restore-predrop.out"
pg_dump -h "$PGHOST" -p "$PGPORT" -d "$dst_direct" -f "$TL_WORK/restored-direct.sql"
pg_dump -h "$PGHOST" -p "$PGPORT" -d "$dst_proxy" -f "$TL_WORK/restored-predrop.sql"
tl_compare "dump of a database restored through predrop" <(clean "$TL_WORK/restored-direct.sql") <(clean "$TL_WORK/restored-predrop.sql")
# Plain SQL restore through psql | pg_dump pipe through predrop.
tl_recreate_db "$dst_proxy"
pg_dump -h "$PGHOST" -p "$PREDROP_PORT" -d "$src" | psql -X -q -v ON_ERROR_STOP=1 -h "$PGHOST" -p "$PREDROP_PORT" -d "$dst_proxy" >"$TL_WORK/pipe.out" 2>&1 \
  || tl_fail "pg_dump | psql through predrop failed: $(tail -n 3 "$TL_WORK/pipe.out")"
pg_dump -h "$PGHOST" -p "$PGPORT" -d "$dst_proxy" -f "$TL_WORK/piped.sql"
tl_compare "pg_dump | psql, both through predrop" <(clean "$TL_WORK/restored-direct.sql") <(clean "$TL_WORK/piped.sql")

for db in "$src" "$dst_direct" "$dst_proxy"; do tl_drop_db "$db"; done
tl_admin "DROP ROLE IF EXISTS cl_dump_reader" || true
tl_predrop_alive || tl_fail "predrop died during the test"
tl_finish
